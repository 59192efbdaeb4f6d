"""load_manifests / load_path: formats, multi-document, List, safety limits, files."""

from __future__ import annotations

import io
import json
import pickle
import sys
import time
from pathlib import Path

import pytest
import yaml

from distsched.model import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    Node,
    Pod,
    load_manifests,
    load_path,
)
from distsched.model.safe_yaml import MAX_ALIAS_EXPANSION, MAX_DEPTH, ManifestLoader


def pod_yaml(name: str, namespace: str = "default", cpu: str = "100m") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
spec:
  containers:
  - name: app
    resources:
      requests:
        cpu: {cpu}
"""


def node_yaml(name: str) -> str:
    return f"""apiVersion: v1
kind: Node
metadata:
  name: {name}
status:
  capacity: {{cpu: "4", memory: 8Gi, pods: "110"}}
"""


def error_of(source: str, text: str | bytes) -> str:
    with pytest.raises(ManifestError) as info:
        load_manifests(source, text)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_multi_document_with_empty_documents_and_comments() -> None:
    text = (
        "# leading comment\n---\n"
        + pod_yaml("a")
        + "---\n---\n# only a comment\n---\n"
        + node_yaml("n1")
        + "...\n---\n"
        + pod_yaml("b", cpu="12x")
    )
    message = error_of("all.yaml", text)
    # Empty documents count, so the number matches the file's separators.
    assert message.startswith("all.yaml: document 5 (Pod default/b): ")
    objects = load_manifests("all.yaml", text.replace("12x", "1"))
    assert [type(o) for o in objects] == [Pod, Node, Pod]
    assert [o.key for o in objects] == ["default/a", "n1", "default/b"]


def test_empty_input() -> None:
    assert load_manifests("empty.yaml", "") == []
    assert load_manifests("empty.yaml", b"---\n---\n") == []


def test_json_object_and_list() -> None:
    pod = load_manifests("p.yaml", pod_yaml("a"))[0]
    assert load_manifests("p.json", json.dumps(pod.to_dict(), indent="\t")) == [pod]
    listing = {"apiVersion": "v1", "kind": "List", "items": [pod.to_dict()]}
    assert load_manifests("l.json", json.dumps(listing).encode()) == [pod]


def test_yaml_flow_mapping_is_not_mistaken_for_json() -> None:
    (node,) = load_manifests("n.yaml", "{apiVersion: v1, kind: Node, metadata: {name: n}}")
    assert node.key == "n"


def test_invalid_json() -> None:
    message = error_of("bad.json", '{"apiVersion": "v1",, }')
    assert message.startswith("bad.json: document 1: invalid JSON: line 1, column 21:")
    duplicate = error_of("d.json", '{"kind": "Pod", "kind": "Node"}')
    assert 'invalid JSON: duplicate key "kind"' in duplicate
    assert "NaN is not valid JSON" in error_of("n.json", '{"kind": NaN}')


def test_list_documents() -> None:
    text = f"""apiVersion: v1
kind: List
items:
- {json.dumps(load_manifests("x", pod_yaml("a"))[0].to_dict())}
- {json.dumps(load_manifests("x", node_yaml("n1"))[0].to_dict())}
---
apiVersion: v1
kind: PodList
items: []
"""
    objects = load_manifests("list.yaml", text)
    assert [o.key for o in objects] == ["default/a", "n1"]


def test_list_item_errors_name_document_and_item() -> None:
    items = [
        load_manifests("x", pod_yaml("a"))[0].to_dict(),
        load_manifests("x", pod_yaml("b"))[0].to_dict(),
    ]
    items[1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12x"
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    text = pod_yaml("first") + "---\n" + listing
    assert error_of("l.yaml", text) == (
        "l.yaml: document 2, item 2 (Pod default/b): spec.containers[0].resources.requests.cpu: "
        'invalid quantity "12x"'
    )


LIST_IN_LIST = '[{"apiVersion": "v1", "kind": "List", "items": []}]'
TYPO = '[{"apiVersion": "v1", "kind": "Servise", "metadata": {"name": "s"}}]'
NO_API_VERSION = '[{"kind": "Node", "metadata": {"name": "n"}}]'


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (LIST_IN_LIST, "document 1, item 1: kind: a List may not contain another List"),
        (TYPO, 'document 1, item 1 (Servise default/s): apiVersion: no matches for kind "Servise"'),
        (NO_API_VERSION, "document 1, item 1 (Node n): apiVersion: required value is missing"),
        ('["pod"]', "document 1, item 1: expected an object, got string"),
        ('{"a": 1}', "document 1: items: expected a list, got object"),
    ],
)
def test_bad_list_items(items: str, expected: str) -> None:
    message = error_of("l.json", f'{{"apiVersion": "v1", "kind": "List", "items": {items}}}')
    assert message.startswith(f"l.json: {expected}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- a\n- b\n", "document 1: expected an object (a mapping), got list"),
        ("just a string\n", "document 1: expected an object (a mapping), got string"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "document 1: kind: required value is missing"),
        (
            "apiVersion: v1\nkind: Servise\n",
            "document 1 (Servise): apiVersion: no matches for kind",
        ),
        (
            "kind: Pod\nmetadata: {name: a}\n",
            "document 1 (Pod default/a): apiVersion: required value is missing",
        ),
        (
            "apiVersion: apps/v1\nkind: Node\n",
            'document 1 (Node): apiVersion: no matches for kind "Node" in version "apps/v1"',
        ),
        ("a: [1, 2\n", "document 1: invalid YAML: line 2, column 1:"),
        ("a: b\n---\nc: [\n", "document 2: invalid YAML:"),
        ("a: *nothing\n", "document 1: invalid YAML: line 1, column 4: undefined alias *nothing"),
        ("a: !!python/object:os.system x\n", "document 1: invalid YAML:"),
    ],
)
def test_document_level_errors(text: str, expected: str) -> None:
    assert error_of("d.yaml", text).startswith(f"d.yaml: {expected}")


def test_errors_survive_pickling() -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests("l.json", '{"apiVersion": "v1", "kind": "List", "items": ["x"]}')
    copy = pickle.loads(pickle.dumps(info.value))
    assert (
        str(copy) == str(info.value) == "l.json: document 1, item 1: expected an object, got string"
    )
    assert (copy.source, copy.document, copy.item, copy.field) == ("l.json", 1, 1, "")


def test_a_syntax_error_anywhere_fails_everything() -> None:
    with pytest.raises(ManifestError, match="document 3: invalid YAML"):
        load_manifests("x.yaml", pod_yaml("a") + "---\n" + pod_yaml("b") + "---\nkind: [\n")


def test_duplicate_keys_are_refused() -> None:
    text = pod_yaml("a").replace("  name: a\n", "  name: a\n  name: b\n")
    assert error_of("dup.yaml", text) == (
        'dup.yaml: document 1: invalid YAML: line 5, column 3: duplicate key "name"'
    )
    quoted = 'apiVersion: v1\nkind: Node\n"kind": Node\nmetadata: {name: n}\n'
    assert 'duplicate key "kind"' in error_of("dup.yaml", quoted)
    flow = "apiVersion: v1\nkind: Node\nmetadata: {name: n, name: m}\n"
    assert 'line 3, column 21: duplicate key "name"' in error_of("dup.yaml", flow)


def test_merge_keys_and_small_aliases_are_allowed() -> None:
    text = """apiVersion: v1
kind: List
items:
- &pod
  apiVersion: v1
  kind: Pod
  metadata: &meta {name: a, labels: &labels {app: web}}
  spec: {containers: [{name: c}], nodeSelector: *labels}
- <<: *pod
  metadata:
    <<: *meta
    name: b
"""
    a, b = load_manifests("alias.yaml", text)
    assert (a.key, b.key) == ("default/a", "default/b")
    assert b.metadata.labels == {"app": "web"}
    assert isinstance(a, Pod)
    assert a.spec.node_selector == {"app": "web"}


BILLION_LAUGHS = """apiVersion: v1
kind: Pod
metadata:
  name: lol
  annotations:
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
spec:
  containers: [{name: c}]
"""


def test_billion_laughs_is_refused_quickly() -> None:
    start = time.perf_counter()
    message = error_of("bomb.yaml", BILLION_LAUGHS)
    assert time.perf_counter() - start < 1.0
    assert message.startswith("bomb.yaml: document 1: invalid YAML: line 10, column")
    assert f"aliases expand the document by more than {MAX_ALIAS_EXPANSION} nodes" in message


def test_alias_budget_counts_expanded_size() -> None:
    # 99 aliases of a 101-node list stay under the budget; 100 exceed it.
    anchor = "a: &a [" + ",".join(["x"] * 100) + "]\n"
    under = anchor + "b: [" + ",".join(["*a"] * 99) + "]\n"
    over = anchor + "b: [" + ",".join(["*a"] * 100) + "]\n"
    assert "kind: required value is missing" in error_of("u.yaml", under)
    assert "aliases expand the document" in error_of("o.yaml", over)


def test_loader_is_safe_through_plain_pyyaml_calls_too() -> None:
    with pytest.raises(yaml.YAMLError, match='duplicate key "a"'):
        yaml.load("a: 1\na: 2\n", Loader=ManifestLoader)
    with pytest.raises(yaml.YAMLError, match="aliases expand"):
        list(yaml.load_all(BILLION_LAUGHS, Loader=ManifestLoader))
    assert yaml.load("t: 2024-01-01\n", Loader=ManifestLoader) == {"t": "2024-01-01"}


def test_recursive_alias_is_refused() -> None:
    assert "recursive alias *a is not allowed" in error_of("r.yaml", "a: &a [1, *a]\n")


def test_deep_nesting_is_refused_without_crashing() -> None:
    deep = "a: " + "[" * 200_000 + "]" * 200_000 + "\n"
    message = error_of("deep.yaml", deep)
    # Our composer's limit, or libyaml's own (PyYAML >= 6.0.4 stops even earlier).
    assert message.startswith("deep.yaml: document 1: ")
    assert (
        f"nested more than {MAX_DEPTH} levels deep" in message
        or "exceeded maximum nesting depth" in message
    )
    deep_json = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert error_of("deep.json", deep_json).startswith("deep.json: document 1: invalid")


def test_binary_garbage_is_refused() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00"
    assert error_of("img.yaml", png) == "img.yaml: not UTF-8 text (byte 0x89 at offset 0)"
    latin1 = "name: caf\xe9\n".encode("latin-1")
    assert error_of("l1.yaml", latin1) == "l1.yaml: not UTF-8 text (byte 0xe9 at offset 9)"
    # valid UTF-8, but control characters
    assert "control characters are not allowed" in error_of("nul.yaml", b"kind: Pod\x00\n")


def test_utf8_bom_is_accepted() -> None:
    (node,) = load_manifests("bom.yaml", b"\xef\xbb\xbf" + node_yaml("n1").encode())
    assert node.key == "n1"


def test_size_limit() -> None:
    big = b"#" * (MAX_MANIFEST_BYTES + 1)
    assert error_of("big.yaml", big) == (
        f"big.yaml: input is larger than {MAX_MANIFEST_BYTES} bytes; split it"
    )


def test_timestamps_stay_strings() -> None:
    stamp = "  creationTimestamp: 2024-01-02T03:04:05Z\n"
    text = pod_yaml("a").replace("  name: a\n", "  name: a\n" + stamp)
    (pod,) = load_manifests("t.yaml", text)
    assert pod.metadata.creation_timestamp == "2024-01-02T03:04:05Z"


def test_duplicate_objects_are_refused() -> None:
    text = pod_yaml("a") + "---\n" + node_yaml("a") + "---\n" + pod_yaml("a", namespace="other")
    assert len(load_manifests("ok.yaml", text)) == 3  # same name, different kind/namespace
    message = error_of("dup.yaml", text + "---\n" + pod_yaml("a"))
    assert message == (
        'dup.yaml: document 4 (Pod default/a): metadata.name: duplicate Pod "default/a": '
        "already defined in dup.yaml: document 1"
    )


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


def test_load_path_file_and_directory(tmp_path: Path) -> None:
    write(tmp_path / "b-nodes.yml", node_yaml("n1"))
    write(tmp_path / "a-pods.yaml", pod_yaml("p1") + "---\n" + pod_yaml("p2"))
    pod = load_manifests("x", pod_yaml("p3"))[0]
    write(tmp_path / "c.JSON", json.dumps(pod.to_dict()))
    write(tmp_path / "notes.txt", "not a manifest")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "ignored.yaml", pod_yaml("nested"))
    objects = load_path(tmp_path)
    assert [o.key for o in objects] == ["default/p1", "default/p2", "n1", "default/p3"]
    assert load_path(str(tmp_path / "b-nodes.yml"))[0].key == "n1"


def test_load_path_empty_directory(tmp_path: Path) -> None:
    assert load_path(tmp_path) == []


def test_load_path_is_all_or_nothing_and_names_the_file(tmp_path: Path) -> None:
    write(tmp_path / "1.yaml", pod_yaml("good"))
    bad = write(tmp_path / "2.yaml", pod_yaml("bad", cpu="-1"))
    with pytest.raises(ManifestError) as info:
        load_path(tmp_path)
    assert str(info.value) == (
        f"{bad}: document 1 (Pod default/bad): spec.containers[0].resources.requests.cpu: "
        'must be greater than or equal to 0, got "-1"'
    )
    assert info.value.source == str(bad)


def test_load_path_refuses_duplicates_across_files(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", pod_yaml("web"))
    second = write(tmp_path / "b.yaml", node_yaml("n") + "---\n" + pod_yaml("web"))
    with pytest.raises(ManifestError) as info:
        load_path(tmp_path)
    assert str(info.value).startswith(f"{second}: document 2 (Pod default/web): metadata.name:")
    assert str(info.value).endswith(f"already defined in {first}: document 1")


def test_load_path_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ManifestError) as info:
        load_path(missing)
    assert str(info.value) == f"{missing}: No such file or directory"


def test_load_path_big_file(tmp_path: Path) -> None:
    big = write(tmp_path / "big.yaml", b"#" * (MAX_MANIFEST_BYTES + 10))
    with pytest.raises(ManifestError, match="input is larger than"):
        load_path(big)


def test_load_path_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(node_yaml("n1").encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert [o.key for o in load_path("-")] == ["n1"]
    bad = io.TextIOWrapper(io.BytesIO(b"apiVersion: v1\nkind: Node\nmetadata: {name: N}\n"))
    monkeypatch.setattr(sys, "stdin", bad)
    with pytest.raises(ManifestError) as info:
        load_path("-")
    assert str(info.value).startswith(
        '<stdin>: document 1 (Node N): metadata.name: invalid value "N"'
    )
