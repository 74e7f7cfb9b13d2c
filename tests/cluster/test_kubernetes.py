"""The Kubernetes recipe of docs/cluster.md: examples/kubernetes/actorrt.yaml, the manifests
the page shows byte for byte. They pass a strict schema check (no unknown or misspelt field)
against a Kubernetes release's published schemas, and every pod can read the token Secret as
the non-root user it runs as."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "examples" / "kubernetes" / "actorrt.yaml"
DOC = ROOT / "docs" / "cluster.md"
KUBERNETES = "1.30.0"  # the oldest release the recipe is checked against
FENCE = re.compile(r"^```[\w-]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def documents() -> list[dict[str, Any]]:
    yaml = pytest.importorskip("yaml")
    return [d for d in yaml.safe_load_all(MANIFESTS.read_text(encoding="utf-8")) if d]


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"])
            for d in documents() if d["kind"] in ("Deployment", "StatefulSet", "Job")]


def test_the_page_shows_the_manifests_it_names() -> None:
    page = DOC.read_text(encoding="utf-8")
    assert MANIFESTS.read_text(encoding="utf-8") in FENCE.findall(page)
    assert "examples/kubernetes/actorrt.yaml" in page


def test_the_manifests_pass_a_strict_schema_check() -> None:
    validate = pytest.importorskip("kubernetes_validate")
    docs = documents()
    assert [d["kind"] for d in docs] == ["Secret", "Service", "Deployment", "Deployment"]
    for doc in docs:
        validate.validate(doc, KUBERNETES, strict=True)  # raises, naming the field
    # The check itself refuses what a typo would make.
    bad = {**docs[0], "stringdata": docs[0]["stringData"]}
    with pytest.raises(validate.ValidationError, match="stringdata"):
        validate.validate(bad, KUBERNETES, strict=True)


READ_AS = """
import os, sys
uid, gid, groups, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.setgroups([int(g) for g in groups.split(",") if g])
os.setgid(gid)
os.setuid(uid)
with open(path) as f:
    f.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root here")
def test_every_pod_reads_the_token_as_its_non_root_user() -> None:
    """The kubelet writes a Secret's files owned by root, with the volume's ``defaultMode``,
    in the group ``fsGroup`` when the pod has one; the container's process runs as
    ``runAsUser``/``runAsGroup`` with ``fsGroup`` among its groups."""
    with tempfile.TemporaryDirectory() as folder:  # not under pytest's, private to root
        os.chmod(folder, 0o711)
        check_pods_read_the_token(Path(folder))


def check_pods_read_the_token(tmp_path: Path) -> None:
    specs = pod_specs()
    assert specs
    for name, spec in specs:
        context = spec.get("securityContext", {})
        assert context.get("runAsNonRoot") is True and context.get("runAsUser"), (
            f"{name}: say which non-root user the pod runs as (runAsNonRoot, runAsUser)"
        )
        uid, gid = context["runAsUser"], context.get("runAsGroup", context["runAsUser"])
        fs_group = context.get("fsGroup")
        groups = [gid, *([fs_group] if fs_group is not None else []),
                  *context.get("supplementalGroups", [])]
        for volume in spec["volumes"]:
            secret = volume.get("secret")
            if secret is None:
                continue
            token = tmp_path / name / volume["name"] / "token"
            token.parent.mkdir(parents=True)
            token.parent.chmod(0o755)
            token.write_text("0" * 64)
            os.chown(token, 0, fs_group if fs_group is not None else 0)
            token.chmod(secret.get("defaultMode", 0o644))
            assert secret.get("defaultMode", 0o644) & 0o007 == 0, (
                f"{name}: the token must not be readable by every user of the node")
            read = subprocess.run(
                [sys.executable, "-c", READ_AS, str(uid), str(gid),
                 ",".join(map(str, groups)), str(token)],
                capture_output=True, text=True, timeout=30,
            )
            assert read.returncode == 0, (
                f"{name}: user {uid} (groups {groups}) cannot read the token file of mode "
                f"{secret.get('defaultMode', 0o644):o}: {read.stderr.strip().splitlines()[-1:]}"
            )
