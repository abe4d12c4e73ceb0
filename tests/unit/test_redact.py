"""Secrets are masked wherever they hide; counts and ordinary settings are left alone."""

from __future__ import annotations

import pytest

from console.core.redact import (
    SECRET_FLAGS,
    StreamMasker,
    argv_secrets,
    redact_argv,
    redact_json,
    redact_text,
    secret_flag,
    secret_name,
    secret_values,
)


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
        # SGLang's model-not-found advice names a placeholder, not a token.
        "or by passing `token=<your_token>`",
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
    from console.bench.campaign import redact_server_info

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
    assert secret_name("--hf-token")
    assert not secret_name("max_total_tokens")


# The line real SGLang logs at launch: an f-string of the resolved dict, keys in clear, only
# the watermark fields redacted (sglang 0.5.23 srt/entrypoints/engine.py:173-174, 1185;
# srt/sampling/watermarking/core.py:25-27, 81-91).
SERVER_ARGS_LINE = (
    "[2026-12-01 10:00:00] server_args={'model_path': 'Qwen/Qwen3.6-27B', 'api_key': "
    "'k-live-1234', 'admin_api_key': 'adm-5678', 'ssl_keyfile': '/etc/k.pem', "
    "'ssl_keyfile_password': 'pw-98765', 'watermark_config': '<redacted>', "
    "'watermark_key': '<redacted>', 'tp_size': 4, 'kt_max_deferred_experts_per_token': 8, "
    "'tokenizer_path': 'Qwen/Qwen3.6-27B', 'max_total_tokens': None}"
)


def test_the_real_server_args_line_is_masked_settings_kept():
    shown = redact_text(SERVER_ARGS_LINE)
    for secret in ("k-live-1234", "adm-5678", "pw-98765"):
        assert secret not in shown
    assert "'api_key': '***'" in shown
    assert "'admin_api_key': '***'" in shown
    assert "'ssl_keyfile_password': '***'" in shown
    for kept in (
        "'ssl_keyfile': '/etc/k.pem'",
        "'tp_size': 4",
        "'kt_max_deferred_experts_per_token': 8",
        "'tokenizer_path': 'Qwen/Qwen3.6-27B'",
        "'watermark_key': '<redacted>'",
    ):
        assert kept in shown, kept


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # An argv printed as a Python list, as SGLang's port-in-use message does.
        (
            "cmdline()=['python3', '--api-key', 'k12345']",
            "cmdline()=['python3', '--api-key', '***']",
        ),
        ('curl -H "Authorization: Bearer abc.def.ghi" x', 'curl -H "Authorization: Bearer ***" x'),
        ("retrying with Bearer eyJabc123456", "retrying with Bearer ***"),
        ("key sk-proj-abcdefghijklmnop1234 set", "key *** set"),
        ("token hf_" + "a1" * 17 + " read", "token *** read"),
        ("--admin-api-k abc123 --ap k99", "--admin-api-k *** --ap ***"),
        ("--ssl-keyfile-p pw123 --ssl-keyfile /k.pem", "--ssl-keyfile-p *** --ssl-keyfile /k.pem"),
        ('--watermark-config \'{"key": "a1"}\'', "--watermark-config '***'"),
        # argparse usage shows the metavar, not a value.
        ("usage: sglang serve [--api-key API_KEY]", "usage: sglang serve [--api-key API_KEY]"),
    ],
)
def test_more_secret_shapes(text: str, shown: str):
    assert redact_text(text) == shown


def test_one_vocabulary_for_fields_variables_and_flags():
    for name in (
        "api_key",
        "admin_api_key",
        "ssl_keyfile_password",
        "watermark_key",
        "watermark_key_b",
        "watermark_config",
        "hf_token",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DDCONSOLE_TEST_KEY",
        "--hf-token",
    ):
        assert secret_name(name), name
    for name in (
        "max_total_tokens",
        "tokenizer_path",
        "speculative_token_map",
        "ssl_keyfile",
        "TOKENIZERS_PARALLELISM",
        "HF_TOKEN_PATH",
        "skip_tokenizer_init",
    ):
        assert not secret_name(name), name


def test_abbreviated_secret_flags_are_secret_flags():
    # The shortest prefixes the real parser resolves uniquely (allow_abbrev over its 531
    # flags, sglang 0.5.23 srt/server_args.py:679): --ap, --ad, --ssl-keyfile-, --wate.
    for flag in ("--ap", "--api-k", "--ad", "--admin-api-k", "--ssl-keyfile-", "--wate=x"):
        assert secret_flag(flag), flag
    for flag in SECRET_FLAGS:
        assert secret_flag(flag)
    for flag in ("--ssl-keyfile", "--port", "--max-total-tokens", "--", "--tp-size"):
        assert not secret_flag(flag), flag


def test_argv_secrets_and_watermark_config():
    argv = [
        "python",
        "--admin-api-k",
        "adm-1234",
        "--ssl-keyfile",
        "/k.pem",
        "--ssl-keyfile-password=pw-1234",
        "--watermark-config",
        '{"key": "wm-aaaa", "key_b": "wm-bbbb", "context_window": 4}',
        "--api-key",
        "1",
    ]
    found = argv_secrets(argv)
    assert {"adm-1234", "pw-1234", "wm-aaaa", "wm-bbbb"} <= found
    assert "/k.pem" not in found
    assert "1" not in found
    shown = redact_argv(argv)
    assert shown[1:9] == [
        "--admin-api-k",
        "***",
        "--ssl-keyfile",
        "/k.pem",
        "--ssl-keyfile-password=***",
        "--watermark-config",
        "***",
        "--api-key",
    ]


def test_trivial_env_values_are_not_secrets():
    env = {"SOME_TOKEN_LIMIT": "4096", "USE_API_KEY": "true", "HF_TOKEN": "hf_realvalue"}
    assert secret_values(env) == {"hf_realvalue"}


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_stream_masker_catches_values_split_across_chunks(size: int):
    secrets = {"sk-ddtest-7f3c9a1e", "pw-98765"}
    text = b"a sk-ddtest-7f3c9a1e b pw-98765 sk-ddtest-7f3c c sk-ddtest-7f3c9a1e\n"
    masker = StreamMasker(secrets)
    out = b"".join(masker.feed(text[i : i + size]) for i in range(0, len(text), size))
    out += masker.flush()
    assert out == b"a *** b *** sk-ddtest-7f3c c ***\n"


def test_stream_masker_holds_back_only_a_possible_secret_start():
    masker = StreamMasker({"sk-secret-1"})
    assert masker.feed(b"line one\n") == b"line one\n"
    assert masker.feed(b"value sk-sec") == b"value "
    assert masker.feed(b"ret-1 done\n") == b"*** done\n"
    assert masker.feed(b"plain") == b"plain"
