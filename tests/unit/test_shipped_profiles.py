"""Every shipped profile loads, and every plan resolves on the simulated reference host."""

from __future__ import annotations

import json

import pytest

from console.hw.simulated import SimulatedGpuBackend
from console.profiles.command import build_command
from console.profiles.loader import ProfileCatalog
from console.profiles.models import Algorithm, Architecture
from console.topology.discover import discover
from console.topology.placement import resolve
from tests.conftest import REPO

# Shipped profiles only: a developer's own user profiles must not change these tests.
CATALOG = ProfileCatalog(user_dir=REPO / "tests" / "no-user-profiles")
SHIPPED = [
    (e.name, layout, variant)
    for e in CATALOG.entries()
    if e.loaded
    for layout in e.loaded.profile.layouts
    for variant in e.loaded.profile.variants
]


def _topology():
    backend = SimulatedGpuBackend(None)
    return discover(backend, backend.numa_nodes)


def test_both_profiles_ship_and_load():
    entries = {e.name: e for e in CATALOG.entries()}
    assert set(entries) >= {"qwen3.6-27b", "kimi-k2.6"}
    for entry in entries.values():
        assert entry.error is None, entry.error
    qwen = entries["qwen3.6-27b"].loaded
    kimi = entries["kimi-k2.6"].loaded
    assert qwen is not None
    assert kimi is not None
    assert qwen.profile.model.architecture is Architecture.HYBRID_GDN
    assert set(qwen.profile.layouts) == {"tp1", "tp4", "tp8", "dp2", "dp2-gateway"}
    assert set(qwen.profile.variants) == {
        "off",
        "dflash",
        "dflash-no-overlap",
        "ddtree-b15",
        "ddtree-b32",
        "ddtree-b64",
        "mtp",
    }
    assert kimi.profile.model.architecture is Architecture.ATTENTION_MLA_MOE
    assert set(kimi.profile.layouts) == {"tp8", "tp16-2node"}
    assert set(kimi.profile.variants) == {
        "off",
        "eagle3",
        "dflash",
        "dflash-no-overlap",
        "ddtree-b15",
        "ddtree-b32",
        "ddtree-b64",
    }


@pytest.mark.parametrize(("profile", "layout", "variant"), SHIPPED)
def test_every_shipped_plan_resolves(profile: str, layout: str, variant: str):
    loaded = CATALOG.get(profile)
    command = build_command(loaded, layout, variant, demo=True)
    plan = resolve(command, _topology(), port_checker=None)
    argv = list(plan.argv)
    assert "--enable-metrics" in argv
    assert argv[argv.index("--tp-size") + 1] == str(loaded.profile.layouts[layout].tp)
    assert plan.env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, plan.gpus))
    spec = loaded.profile.variants[variant]
    if spec.algorithm.is_speculative:
        # SGLang caps it silently at 48 unless given.
        assert "--max-running-requests" in argv
        assert argv[argv.index("--speculative-algorithm") + 1] == spec.algorithm.value
    else:
        assert "--speculative-algorithm" not in argv
    hybrid_spec = (
        loaded.profile.model.architecture is Architecture.HYBRID_GDN
        and spec.algorithm.is_speculative
    )
    assert ("--mamba-radix-cache-strategy" in argv) == hybrid_spec
    assert "--mamba-scheduler-strategy" not in argv
    assert not any(w.code == "removed-flag" for w in plan.warnings)
    ddtree_warned = any(w.code == "needs-ddtree-build" for w in plan.warnings)
    assert ddtree_warned == (spec.algorithm is Algorithm.DDTREE)
    if spec.algorithm is Algorithm.DDTREE:
        assert "DDTree pull request" in spec.requires


def test_qwen_tp1_ddtree_b15_plan_json(cli):
    result = cli(
        "plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "ddtree-b15", "--demo", "--json"
    )
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    argv = plan["argv"]
    assert argv[argv.index("--speculative-algorithm") + 1] == "DDTREE"
    assert argv[argv.index("--speculative-ddtree-budget") + 1] == "15"
    assert argv[argv.index("--speculative-draft-model-path") + 1] == "z-lab/Qwen3.6-27B-DFlash"
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert plan["gpus"] == [0]
    assert plan["numa_nodes"] == [0]
    assert plan["port"] == 30000
    assert argv[1:3] == ["-m", "console.sim"]  # demo swaps only the entry
    assert not any(w["code"] == "numa-crossing" for w in plan["warnings"])
    assert {"argv", "env", "gpus", "numa_nodes", "port", "warnings"} <= set(plan)


def test_kimi_tp8_spans_both_nodes_with_warning(cli):
    result = cli("plan", "kimi-k2.6", "--layout", "tp8", "--variant", "off", "--demo", "--json")
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    argv = plan["argv"]
    assert argv[argv.index("--tp-size") + 1] == "8"
    assert plan["gpus"] == list(range(8))
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert plan["numa_nodes"] == [0, 1]
    crossing = [w for w in plan["warnings"] if w["code"] == "numa-crossing"]
    assert len(crossing) == 1
    assert "NUMA nodes 0, 1" in crossing[0]["message"]
    # Pinned binding, indexed by the GPU id SGLang sees after CUDA_VISIBLE_DEVICES.
    assert argv[argv.index("--numa-node") + 1 :][:8] == ["0"] * 4 + ["1"] * 4


def test_real_and_demo_argv_differ_only_in_entry():
    loaded = CATALOG.get("qwen3.6-27b")
    real = build_command(loaded, "tp4", "mtp", demo=False)
    demo = build_command(loaded, "tp4", "mtp", demo=True)
    assert real.argv[:3] == ("python3", "-m", "sglang.launch_server")
    assert demo.argv[1:3] == ("-m", "console.sim")
    assert real.argv[3:] == demo.argv[3:]
    # Qwen3.6 MTP needs the draft path set to the model itself.
    argv = list(real.argv)
    assert argv[argv.index("--speculative-draft-model-path") + 1] == "Qwen/Qwen3.6-27B"


def test_plan_human_output_names_everything(cli):
    result = cli("plan", "kimi-k2.6", "--variant", "eagle3", "--demo")
    assert result.code == 0
    for text in (
        "plan kimi-k2.6 / tp8 / eagle3",
        "EAGLE3",
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
        "spans NUMA nodes 0, 1",
        "--speculative-num-steps 3",
        "GPU 6 PCIe link",
    ):
        assert text in result.out


def test_port_override_and_busy_warning(cli):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = cli("plan", "kimi-k2.6", "--demo", "--json", "--port", str(port))
    plan = json.loads(result.out)
    assert plan["port"] == port
    assert any(w["code"] == "port-busy" and str(port) in w["message"] for w in plan["warnings"])
    bad = cli("plan", "kimi-k2.6", "--demo", "--port", "99999")
    assert bad.code == 2
    assert "--port 99999 is out of range" in bad.err
