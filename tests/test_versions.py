"""The supported releases, as pyproject.toml declares them.

Installing pallas-prof never changes a supported jax, jaxlib or triton the
user already has: pip leaves an installed distribution alone when it meets
the requirement, so the ranges must admit every supported release, and the
one this test runs under (tools/test.sh also checks, per leg, that the
install changed none of them).
"""
from __future__ import annotations

import os
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUPPORTED = {"jax": ["0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.12.0.1", "0.12.9"],
             "jaxlib": ["0.10.2", "0.11.2", "0.12.0.1"],
             "triton": ["3.6.0", "3.7.0", "3.8.1", "3.9.0", "3.9.4"]}
UNSUPPORTED = {"jax": ["0.10.1", "0.13.0"], "jaxlib": ["0.9.0", "0.13.0"],
               "triton": ["3.5.1", "3.10.0"]}


def _requirements() -> dict[str, Requirement]:
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
  reqs = {Requirement(d).name: Requirement(d) for d in deps}
  return {name: reqs[name] for name in SUPPORTED}


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_the_ranges_admit_every_supported_release_and_no_other(name):
  spec = _requirements()[name].specifier
  for v in SUPPORTED[name]:
    assert spec.contains(Version(v)), (name, v, str(spec))
  for v in UNSUPPORTED[name]:
    assert not spec.contains(Version(v)), (name, v, str(spec))


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_the_installed_release_meets_its_requirement(name):
  """So pip, resolving pallas-prof's requirements here, keeps what is installed."""
  installed = Version(metadata.version(name))
  assert _requirements()[name].specifier.contains(installed), (name, str(installed))
