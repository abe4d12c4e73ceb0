"""SGLang's own benchmark client runs unmodified against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

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


@pytest.fixture(scope="module")
def tokenizer_dir(sglang_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-tokenizer")
    subprocess.run(
        [sglang_python, "-c", MAKE_TOKENIZER, str(folder)],
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return folder


def _ground_truth_tok_s(records: list[dict], skip_first: int) -> float:
    """Output tokens per simulated second over the benchmark's requests (warmup excluded)."""
    measured = records[skip_first:]
    start = min(r["arrival_s"] for r in measured)
    end = max(r["finished_s"] for r in measured)
    return sum(r["completion_tokens"] for r in measured) / (end - start)


@pytest.mark.parametrize("backend", ["sglang", "sglang-oai-chat"])
def test_bench_serving_against_simulator(
    sglang_python: str, tokenizer_dir: Path, tmp_path: Path, backend: str
):
    with running_sim(QWEN, tmp_path, speed=SPEED) as sim:
        before = len(sim.stats()["requests"])
        output = tmp_path / "bench.jsonl"
        completed = subprocess.run(
            [
                sglang_python,
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
            capture_output=True,
            text=True,
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
