"""Every simple mutation of a module, as a compiled variant of it.

The operators are the ones a wrong domain rule most often looks like:

- a comparison's boundary or sense (`<` and `<=`, `==` and `!=`, `in` and `not in`, ...);
- arithmetic (`+` and `-`, `*` and `//`, ...), also in augmented assignments;
- a number one off (`n + 1`, `n - 1`), a boolean flipped;
- `and` and `or` swapped;
- a condition negated (`if`, `while`, a conditional expression, a comprehension's filter),
  or its `not` removed, a unary minus removed;
- a returned value replaced by `None`.

Docstrings, annotations, decorators (`frozen=True`), `__all__` and strings are left alone:
changing them changes no rule.
Each mutant is compiled from the mutated tree, so its line numbers are the module's own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

_COMPARISONS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}


@dataclass(frozen=True)
class Mutant:
    """One change to one module: where it is, what it does, and the module's code with it."""

    module: str
    """The module's path under the package, e.g. `window.py` or `rules/model.py`."""
    index: int
    line: int
    line_text: str
    """The mutated line as written, stripped: how an equivalence is recognised after edits."""
    change: str
    """The change as source, e.g. "`len(content) == 1` → `len(content) != 1`"."""
    tree: ast.Module

    def code(self, filename: str) -> CodeType:
        # Not inheriting this module's `from __future__` flags: the mutant compiles as its
        # module does.
        return compile(self.tree, filename, "exec", dont_inherit=True)


def mutants_of(path: Path, module: str) -> list[Mutant]:
    """Every mutant of the module at `path`, in source order."""
    source = path.read_text()
    lines = source.splitlines()
    sites = list(_Sites(ast.parse(source)))
    mutants = []
    for index, site in enumerate(sites):
        tree = ast.parse(source)
        node = _Sites(tree).nth(index)
        before = ast.unparse(_shown(node, site))
        after = _shown(site.apply(node), site)
        ast.fix_missing_locations(tree)
        line = site.line
        mutants.append(
            Mutant(
                module=module,
                index=index,
                line=line,
                line_text=lines[line - 1].strip(),
                change=f"`{_short(before)}` → `{_short(ast.unparse(after))}`",
                tree=tree,
            )
        )
    return mutants


@dataclass(frozen=True)
class _Site:
    """A node that can be mutated one way; `apply` mutates a copy's matching node in place."""

    kind: str
    line: int
    detail: int = 0

    def apply(self, node: ast.AST) -> ast.AST:
        return _APPLY[self.kind](node, self.detail)


class _Sites:
    """The mutation sites of a tree in a fixed order, so a fresh parse finds the same nth."""

    def __init__(self, tree: ast.Module) -> None:
        self._found: list[tuple[_Site, ast.AST]] = []
        self._visit(tree)

    def __iter__(self) -> Iterator[_Site]:
        return (site for site, _ in self._found)

    def nth(self, index: int) -> ast.AST:
        return self._found[index][1]

    def _add(self, kind: str, node: ast.AST, detail: int = 0) -> None:
        located = node.ifs[detail] if isinstance(node, ast.comprehension) else node
        self._found.append((_Site(kind, getattr(located, "lineno", 0), detail), node))

    def _visit(self, node: ast.AST) -> None:
        if _is_docstring_or_unmutated(node):
            return
        self._sites_of(node)
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "type_comment", "decorator_list"):
                continue
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST):
                    self._visit(child)

    def _sites_of(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare):
            for position, op in enumerate(node.ops):
                if type(op) in _COMPARISONS:
                    self._add("compare", node, position)
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITHMETIC:
            self._add("arithmetic", node)
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                self._add("flip", node)
            elif isinstance(node.value, int | float):
                self._add("plus_one", node)
                self._add("minus_one", node)
        elif isinstance(node, ast.BoolOp):
            self._add("and_or", node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
            self._add("drop_unary", node)
        elif isinstance(node, ast.Return) and _returns_a_value(node):
            self._add("return_none", node)
        self._condition_sites(node)

    def _condition_sites(self, node: ast.AST) -> None:
        if isinstance(node, ast.If | ast.While | ast.IfExp) and not _is_not(node.test):
            self._add("negate_test", node)
        elif isinstance(node, ast.comprehension):
            for position, condition in enumerate(node.ifs):
                if not _is_not(condition):
                    self._add("negate_filter", node, position)


def _is_docstring_or_unmutated(node: ast.AST) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return isinstance(node.value.value, str)
    if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
        return True
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    # A bare annotation (`size: int`) has nothing to mutate.
    return isinstance(node, ast.AnnAssign) and node.value is None


def _returns_a_value(node: ast.Return) -> bool:
    value = node.value
    if value is None:
        return False
    return not (
        isinstance(value, ast.Constant) and (value.value is None or value.value in (True, False))
    )


def _is_not(node: ast.expr) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)


def _compare(node: ast.AST, position: int) -> ast.AST:
    assert isinstance(node, ast.Compare)
    node.ops[position] = _COMPARISONS[type(node.ops[position])]()
    return node


def _arithmetic(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.BinOp | ast.AugAssign)
    node.op = _ARITHMETIC[type(node.op)]()
    return node


def _flip(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.Constant)
    node.value = not node.value
    return node


def _plus_one(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.Constant)
    assert isinstance(node.value, int | float)
    node.value = node.value + 1
    return node


def _minus_one(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.Constant)
    assert isinstance(node.value, int | float)
    node.value = node.value - 1
    return node


def _and_or(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.BoolOp)
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    return node


def _drop_unary(node: ast.AST, _: int) -> ast.AST:
    # Mutated in place, so the operator changes rather than the node: `-x` becomes `+x`, and
    # `not x` becomes `not (not x)`, which is `x`'s truth, as a condition without its `not` is.
    assert isinstance(node, ast.UnaryOp)
    if isinstance(node.op, ast.USub):
        node.op = ast.UAdd()
    else:
        node.operand = ast.UnaryOp(op=ast.Not(), operand=node.operand)
    return node


def _return_none(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.Return)
    node.value = ast.Constant(value=None)
    return node


def _negate_test(node: ast.AST, _: int) -> ast.AST:
    assert isinstance(node, ast.If | ast.While | ast.IfExp)
    node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    return node


def _negate_filter(node: ast.AST, position: int) -> ast.AST:
    assert isinstance(node, ast.comprehension)
    node.ifs[position] = ast.UnaryOp(op=ast.Not(), operand=node.ifs[position])
    return node


_APPLY = {
    "compare": _compare,
    "arithmetic": _arithmetic,
    "flip": _flip,
    "plus_one": _plus_one,
    "minus_one": _minus_one,
    "and_or": _and_or,
    "drop_unary": _drop_unary,
    "return_none": _return_none,
    "negate_test": _negate_test,
    "negate_filter": _negate_filter,
}


def _short(source: str, limit: int = 90) -> str:
    flat = " ".join(source.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _shown(node: ast.AST, site: _Site) -> ast.AST:
    """The part of the node a reader needs to see the change: a condition, not its block."""
    if isinstance(node, ast.If | ast.While | ast.IfExp):
        return node.test
    if isinstance(node, ast.comprehension):
        return node.ifs[site.detail]
    return node
