"""A profile's `[bench] slo` is the default SLO of benchmarks and campaign cells of its
servers; a campaign's own `slo` wins; a bad one is refused naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.bench.request import CampaignRequest
from console.bench.spec import CampaignSpec
from console.core.errors import ProfileError, UsageError
from console.profiles.loader import ProfileCatalog, shipped_profiles_dir

QWEN = "qwen3.6-27b"


def catalog_with(tmp_path: Path, bench_table: str) -> ProfileCatalog:
    user = tmp_path / "profiles"
    user.mkdir()
    text = (shipped_profiles_dir() / f"{QWEN}.toml").read_text()
    (user / f"{QWEN}.toml").write_text(text + "\n[bench]\n" + bench_table + "\n")
    return ProfileCatalog(user_dir=user)


def spec(**changes: object) -> CampaignSpec:
    return CampaignSpec(name="c", profile=QWEN, layouts=["tp1"], variants=["off"], **changes)


def test_a_cell_without_a_campaign_slo_takes_its_profiles(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, 'slo = "ttft=2s,itl=60ms"')
    request = CampaignRequest(spec=spec()).check(catalog)
    assert request.profile_slos == {QWEN: "ttft=2s,itl=60ms"}
    target = request.slo_target(QWEN)
    assert target is not None
    assert (target.ttft_s, target.itl_s) == (2.0, 0.06)
    stored = CampaignRequest.from_json(request.to_json())
    assert stored.slo_target(QWEN) == target


def test_the_campaigns_own_slo_wins(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, 'slo = "ttft=2s"')
    request = CampaignRequest(spec=spec(slo="ttft=300ms", attainment=0.9)).check(catalog)
    target = request.slo_target(QWEN)
    assert target is not None
    assert (target.ttft_s, target.attainment) == (0.3, 0.9)


def test_a_search_needs_targets_from_somewhere(tmp_path: Path) -> None:
    catalog = ProfileCatalog(user_dir=tmp_path / "none")
    with pytest.raises(UsageError, match="--find-max concurrency needs latency targets"):
        CampaignRequest(spec=spec(find_max="concurrency")).check(catalog)
    with_default = catalog_with(tmp_path, 'slo = "ttft=2s"')
    CampaignRequest(spec=spec(find_max="concurrency")).check(with_default)


def test_a_bad_profile_slo_names_the_file_and_key(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, 'slo = "ttft=soon"')
    with pytest.raises(ProfileError) as caught:
        catalog.get(QWEN)
    assert "bench.slo" in str(caught.value)
    assert f"{QWEN}.toml" in str(caught.value)
