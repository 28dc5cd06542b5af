"""The files a fork starts from: `examples/` loads as the README says, and the CI workflow runs the house's checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from config import Settings
from profiles.channels import load_profiles_file
from tools import load_mcp_servers

ROOT = Path(__file__).resolve().parent.parent


def test_the_example_profiles_file_loads(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(
        profiles_file=ROOT / "examples" / "profiles.toml",
        models="anthropic:claude-sonnet-4-5,openai:gpt-4.1-mini",
    )

    profiles = load_profiles_file(settings)

    assert profiles.servers[1187034472391798784]["tools"] == "archive,memory"
    support_desk = profiles.channels[1187034472391798787]
    assert support_desk["model"] == "anthropic:claude-sonnet-4-5"
    assert support_desk["mode"] == "mention-only"


def test_the_example_mcp_servers_file_loads_without_starting_anything() -> None:
    servers = load_mcp_servers(str(ROOT / "examples" / "mcp_servers.json"), timeout_seconds=30)

    assert [server.name for server in servers] == ["orders", "docs"]


def test_the_ci_workflow_runs_the_house_checks_on_pushes_and_pull_requests() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))

    # YAML 1.1 reads the key `on` as True.
    triggers = workflow.get("on", workflow.get(True))
    assert set(triggers) >= {"push", "pull_request"}
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(step.get("run") == "bash .ci/run" for step in steps)
