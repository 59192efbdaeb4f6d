"""Label selectors and pod affinity terms compiled once into hashable matchers.

Semantics of metav1.LabelSelectorAsSelector: a nil selector matches nothing, an empty
one everything, matchLabels and matchExpressions are ANDed. A pod affinity term
(kube's framework.AffinityTerm) matches a pod when the pod's namespace is one of the
term's namespaces (defaulting to the owner's namespace when the term names neither
namespaces nor a namespaceSelector) or its namespace's labels match the
namespaceSelector, and the pod's labels match the labelSelector. The namespace's labels
come from the caller (kube's ``AffinityTerm.Matches(pod, nsLabels)``): a worker asks its
namespace lister (framework/listers.py).

Compiled objects are cached by a canonical key, since the model's selectors hold dicts
and are not hashable themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from distsched.model.decode_common import SELECTOR_OPERATORS
from distsched.model.objects import LabelSelector, PodAffinityTerm

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_OPERATORS = frozenset(SELECTOR_OPERATORS)
_CACHE_SIZE = 4096


# A namespace's labels by its name (a worker's NamespaceLabels.of).
NamespaceLabelsOf = Callable[[str], Mapping[str, str]]


class InvalidSelector(ValueError):
    """A selector kube's LabelSelectorAsSelector would refuse."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == "NotIn":
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False  # labels.Nothing(): the selector of a nil LabelSelector

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    def empty(self) -> bool:
        """kube's Selector.Empty(): selects everything (Nothing is not empty)."""
        return not self.nothing and not self.requirements

    def with_labels(self, labels: Mapping[str, str]) -> Selector:
        """kube's mergeLabelSetWithSelector: ``labels`` ANDed in; Nothing stays Nothing."""
        if self.nothing or not labels:
            return self
        extra = tuple(Requirement(k, "In", frozenset((v,))) for k, v in labels.items())
        return Selector(_canonical(extra + self.requirements))


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def _canonical(requirements: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
    unique = set(requirements)
    return tuple(sorted(unique, key=lambda r: (r.key, r.operator, sorted(r.values))))


def selector_key(selector: LabelSelector | None) -> Hashable:
    if selector is None:
        return None
    return (tuple(sorted(selector.match_labels.items())), selector.match_expressions)


_selectors: dict[Hashable, Selector] = {}


def compile_selector(selector: LabelSelector | None) -> Selector:
    """The matcher of a model LabelSelector; raises InvalidSelector like kube would."""
    key = selector_key(selector)
    compiled = _selectors.get(key)
    if compiled is not None:
        return compiled
    if selector is None:
        compiled = NOTHING
    else:
        requirements = [
            Requirement(k, "In", frozenset((v,))) for k, v in selector.match_labels.items()
        ]
        for expr in selector.match_expressions:
            if expr.operator not in _OPERATORS:
                raise InvalidSelector(f"{expr.operator!r} is not a valid label selector operator")
            if expr.operator in ("In", "NotIn") and not expr.values:
                raise InvalidSelector(
                    f"values: Invalid value: []: for 'in', 'notin' operators, values set can't be "
                    f"empty (key {expr.key!r})"
                )
            if expr.operator in ("Exists", "DoesNotExist") and expr.values:
                raise InvalidSelector(
                    f"values: Invalid value: {list(expr.values)}: values set must be empty for "
                    f"exists and does not exist (key {expr.key!r})"
                )
            requirements.append(Requirement(expr.key, expr.operator, frozenset(expr.values)))
        compiled = Selector(_canonical(tuple(requirements)))
    _remember(_selectors, key, compiled)
    return compiled


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod affinity term with its namespaces resolved against the owner's namespace.

    ``topology_key`` is "" for terms used only to select pods (a spread constraint's
    selector, or a query that ignores topology)."""

    topology_key: str
    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector = NOTHING

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: NamespaceLabelsOf
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is selected; the namespace's
        labels are asked of ``namespace_labels`` only when the namespaceSelector decides."""
        if namespace not in self.namespaces and (
            self.namespace_selector.nothing
            or not self.namespace_selector.matches(namespace_labels(namespace))
        ):
            return False
        return self.selector.matches(labels)

    def without_topology(self) -> AffinityTerm:
        if not self.topology_key:
            return self
        return AffinityTerm("", self.selector, self.namespaces, self.namespace_selector)


def term_key(term: PodAffinityTerm) -> Hashable:
    return (
        term.topology_key,
        selector_key(term.label_selector),
        term.namespaces,
        selector_key(term.namespace_selector),
    )


_terms: dict[Hashable, AffinityTerm] = {}


def compile_term(term: PodAffinityTerm, owner_namespace: str) -> AffinityTerm:
    """kube's newAffinityTerm for a term declared by a pod in ``owner_namespace``."""
    key = (owner_namespace, term_key(term))
    compiled = _terms.get(key)
    if compiled is not None:
        return compiled
    namespaces = frozenset(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = frozenset((owner_namespace,))
    compiled = AffinityTerm(
        term.topology_key,
        compile_selector(term.label_selector),
        namespaces,
        compile_selector(term.namespace_selector),
    )
    _remember(_terms, key, compiled)
    return compiled


def compile_terms(
    terms: tuple[PodAffinityTerm, ...], owner_namespace: str
) -> tuple[AffinityTerm, ...]:
    return tuple(compile_term(term, owner_namespace) for term in terms)


def _remember(cache: dict, key: Hashable, value: object) -> None:  # type: ignore[type-arg]
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value
