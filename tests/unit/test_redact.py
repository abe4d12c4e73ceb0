"""Secrets are masked wherever they hide; counts and ordinary settings are left alone."""

from __future__ import annotations

import pytest

from console.core.redact import redact_argv, redact_json, redact_text, secret_values


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("launch --api-key sk-abc123 --port 3", "launch --api-key *** --port 3"),
        ("--admin-api-key=abc123", "--admin-api-key=***"),
        ("Authorization: Bearer tok123", "Authorization: Bearer ***"),
        ("HF_TOKEN=hf_xyz AWS_SECRET_ACCESS_KEY=abc", "HF_TOKEN=*** AWS_SECRET_ACCESS_KEY=***"),
        ("ServerArgs(api_key='s3cret', port=1)", "ServerArgs(api_key='***', port=1)"),
        ('{"api_key": "zz99"}', '{"api_key": "***"}'),
    ],
)
def test_secret_shapes_are_masked(text: str, shown: str):
    assert redact_text(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "Decode batch, #running-req: 1, #token: 700, #new-token: 512",
        "TOKENIZERS_PARALLELISM=false NCCL_IB_DISABLE=1",
        "--max-total-tokens 8192 --skip-tokenizer-init",
        "api_key=None",
    ],
)
def test_ordinary_text_is_untouched(text: str):
    assert redact_text(text) == text


def test_known_values_are_masked_anywhere():
    assert redact_text("clients present sk-live-42abc", {"sk-live-42abc"}) == "clients present ***"


def test_env_secrets_are_found_by_name_and_by_profile():
    env = {"HF_TOKEN": "hf_abcdef", "MY_KEY": "k-123456", "PATH": "/usr/bin", "X_TOKEN": "ab"}
    assert secret_values(env, ["MY_KEY"]) == {"hf_abcdef", "k-123456"}


def test_argv_and_json():
    assert redact_argv(["python", "--api-key", "sk-1", "--max-total-tokens", "8"]) == [
        "python",
        "--api-key",
        "***",
        "--max-total-tokens",
        "8",
    ]
    data = {
        "api_key": "x1234",
        "bos_token_id": 5,
        "env": {"OPENAI_API_KEY": "sk-9"},
        "argv": ["--hf-token", "t"],
    }
    assert redact_json(data) == {
        "api_key": "***",
        "bos_token_id": 5,
        "env": {"OPENAI_API_KEY": "***"},
        "argv": ["--hf-token", "***"],
    }
