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


def test_server_info_secret_fields_are_masked_and_settings_kept():
    from console.bench.campaign import redact_server_info, secret_field

    info = {
        "api_key": "k-123456",
        "admin_api_key": None,
        "ssl_keyfile_password": "pw-98765",
        "ssl_keyfile": "/etc/ssl/key.pem",
        "watermark_key_b": "wm-55555",
        "max_total_tokens": 8192,
        "bos_token_id": 1,
        "speculative_num_draft_tokens": 16,
        "tokenizer_path": "Qwen/Qwen3.6-27B",
        "speculative_token_map": "/maps/x.pt",
        "launch_command": "--model-path m --api-key k-123456 --ssl-keyfile-password=pw-98765",
        "internal_states": [{"note": "started with pw-98765"}],
    }
    clean = redact_server_info(info)
    assert clean is not None
    assert clean["api_key"] == clean["ssl_keyfile_password"] == clean["watermark_key_b"] == "***"
    assert clean["admin_api_key"] is None
    for kept in (
        "ssl_keyfile",
        "max_total_tokens",
        "bos_token_id",
        "speculative_num_draft_tokens",
        "tokenizer_path",
        "speculative_token_map",
    ):
        assert clean[kept] == info[kept], kept
    assert clean["launch_command"] == "--model-path m --api-key *** --ssl-keyfile-password=***"
    assert "pw-98765" not in str(clean)
    assert secret_field("--hf-token")
    assert not secret_field("max_total_tokens")
