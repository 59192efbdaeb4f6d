"""A Job's pods join the PodGroup its template names (issue 22): the controller copies the
template's ``scheduling.x-k8s.io/pod-group`` label and its ``spec.schedulingGroup`` onto
every pod it makes, and the group's status counts them."""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.controllers.workload import WorkloadController
from distsched.keys import Keys
from distsched.model.podgroups import POD_GROUP_LABEL, PodGroup, group_of_object, podgroup_status
from distsched.store import Store
from tests.controllers.helpers import apply_text, pods_of

JOB = """
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: ml}}
spec:
  parallelism: 3
  completions: 3
  template:
    metadata: {{labels: {labels}}}
    spec:
{spec}      restartPolicy: Never
      containers:
      - name: worker
        image: trainer:1
        resources: {{requests: {{cpu: 500m, memory: 256Mi}}}}
"""
GROUPS = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: by-label, namespace: ml}
spec: {minMember: 3}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: by-field, namespace: ml}
spec: {minMember: 3}
"""


def test_job_pods_carry_the_templates_pod_group_label_and_field(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    apply_text(store, GROUPS, "groups.yaml")
    apply_text(
        store,
        JOB.format(name="labelled", labels=f"{{{POD_GROUP_LABEL}: by-label, app: t}}", spec=""),
    )
    apply_text(
        store,
        JOB.format(
            name="fielded",
            labels="{app: f}",
            spec="      schedulingGroup: {podGroupName: by-field}\n",
        ),
    )
    WorkloadController(r, keys, clock=clock).sync()

    labelled = pods_of(store, "labelled-", "ml")
    assert len(labelled) == 3
    for pod in labelled:
        assert pod["metadata"]["labels"][POD_GROUP_LABEL] == "by-label"
        assert group_of_object(pod) == "ml/by-label"
    fielded = pods_of(store, "fielded-", "ml")
    assert len(fielded) == 3
    for pod in fielded:
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "by-field"}
        assert group_of_object(pod) == "ml/by-field"

    pods = store.list("Pod", "ml")[0]
    for key in ("ml/by-label", "ml/by-field"):
        stored = store.get("PodGroup", key)
        assert stored is not None
        status = podgroup_status(PodGroup.from_dict(stored), pods)
        assert (status["phase"], status["pods"], status["scheduled"]) == ("Scheduling", 3, 0)
