#!/usr/bin/env python3
"""Writes the Python API reference, docs/python_api.md, from the package's type stubs and its docstrings.

Usage: python_api_reference.py PACKAGE_DIR [--output FILE | --check FILE]

PACKAGE_DIR holds the package lockstep as the build tree or an installation lays it out (<builddir>/bindings/python),
with its extension built. Every public name of lockstep (its __all__) and of lockstep.torch is written with its
signature as the stubs (lockstep/*.pyi, which mypy checks) give it: arguments, defaults, return type, overloads; and
with the docstring the imported object carries (the pybind11 or Python one), which says what it does and what it raises.

A public function, class, method or property without a docstring is an error (exit 1), as is, with --check, a FILE
that differs from what this run writes (the diff is printed). Without --output or --check the reference goes to
standard output. Run with the interpreter the package was built for (Debian's /usr/bin/python3).
"""
import argparse
import ast
import difflib
import importlib
import inspect
import os
import re
import sys

TITLE = "# Python API reference"
# What the module-level values are (they carry no docstring of their own).
CONSTANTS = {
    "lockstep.__version__": 'The C library\'s version, "major.minor.patch".',
    "lockstep.torch.BACKEND": 'The backend\'s name for torch.distributed, "lockstep".',
    "lockstep.torch.GLOO_BACKEND": 'The checking backend around gloo, "lockstep_gloo" (docs/checking-torch.md).',
    "lockstep.torch.NCCL_BACKEND": 'The checking backend around NCCL, "lockstep_nccl" (docs/checking-torch.md).',
}


def stub_tree(package_dir, module):
    path = os.path.join(package_dir, "lockstep", module + ".pyi")
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def own_doc(obj, name):
    """The docstring of obj without pybind11's signature line (the stubs give the signature)."""
    doc = getattr(obj, "__doc__", None)
    if not doc or (isinstance(obj, property) is False and doc == getattr(type(obj), "__doc__", None)):
        return ""
    doc = inspect.cleandoc(doc)
    first, _, rest = doc.partition("\n")
    # pybind11 opens with "name(arguments) -> type", a property without a docstring with "(arg0: ...) -> type".
    if re.match(rf"^({re.escape(name)})?\(.*\) -> \S", first):
        doc = rest.strip()
    return doc


def signature(node):
    """`name(args) -> return` of a stub's def, written as the stub has it (without self)."""
    args = node.args
    parts = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        if i == 0 and arg.arg in ("self", "cls"):
            continue
        parts.append(argument(arg, default))
        if args.posonlyargs and arg is args.posonlyargs[-1]:
            parts.append("/")
    if args.vararg:
        parts.append("*" + argument(args.vararg, None))
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        parts.append(argument(arg, default))
    if args.kwarg:
        parts.append("**" + argument(args.kwarg, None))
    result = f"{node.name}({', '.join(parts)})"
    if node.returns is not None:
        result += " -> " + ast.unparse(node.returns)
    return result


def argument(arg, default):
    text = arg.arg
    if arg.annotation is not None:
        text += ": " + ast.unparse(arg.annotation)
    if default is not None:
        value = ast.unparse(default)
        text += (" = " if arg.annotation is not None else "=") + value
    return text


def decorators(node):
    return {ast.unparse(d) for d in node.decorator_list}


def public(name):
    return not name.startswith("_") or name in ("__init__", "__call__")


class Reference:
    def __init__(self):
        self.lines = []
        self.undocumented = []

    def doc(self, qualified, obj, name):
        text = own_doc(obj, name)
        if not text:
            if name != "__init__":  # the class's docstring says how to make one
                self.undocumented.append(qualified)
            return
        self.lines += ["", text]

    def function(self, qualified, obj, nodes, level):
        self.lines += ["", f"{'#' * level} `{qualified}`", ""]
        self.lines += ["```python"] + [signature(n) for n in nodes] + ["```"]
        self.doc(qualified, obj, nodes[0].name)

    def klass(self, qualified, cls, node, level):
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        self.lines += ["", f"{'#' * level} class `{qualified}`" + (f"({bases})" if bases else "")]
        self.doc(qualified, cls, node.name)
        members = {}
        order = []
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AnnAssign)):
                name = item.name if isinstance(item, ast.FunctionDef) else ast.unparse(item.target)
                if not public(name):
                    continue
                if name not in members:
                    order.append(name)
                members.setdefault(name, []).append(item)
        for name in order:
            nodes = members[name]
            member = inspect.getattr_static(cls, name, None)
            where = f"{qualified}.{name}"
            if isinstance(nodes[0], ast.AnnAssign):
                annotation = ast.unparse(nodes[0].annotation)
                self.lines += ["", f"{'#' * (level + 1)} `{where}: {annotation}` (attribute)"]
                if isinstance(member, property) or (member is not None and hasattr(member, "__get__")):
                    self.doc(where, member, name)
                continue
            if "property" in decorators(nodes[0]):
                self.lines += [
                    "",
                    f"{'#' * (level + 1)} `{where}` (read-only property) -> " f"`{ast.unparse(nodes[0].returns)}`",
                ]
                self.doc(where, member, name)
                continue
            kind = " (static method)" if "staticmethod" in decorators(nodes[0]) else ""
            overloads = [n for n in nodes if "overload" not in decorators(n)] or nodes
            if len(nodes) > 1:
                overloads = [n for n in nodes if "overload" in decorators(n)]
            self.lines += ["", f"{'#' * (level + 1)} `{where}`{kind}", ""]
            self.lines += ["```python"] + [signature(n) for n in overloads] + ["```"]
            runtime = getattr(cls, name, None)
            if name == "__init__" and runtime is not None and runtime is object.__init__:
                continue
            self.doc(where, runtime, name)


def stub_definitions(tree):
    """{name: [nodes]} of a stub module's top level, and {name: (module, original name)} of its re-exports."""
    definitions, imported = {}, {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            definitions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign):
            definitions.setdefault(ast.unparse(node.target), []).append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                definitions.setdefault(ast.unparse(target), []).append(node)
        elif isinstance(node, ast.ImportFrom) and node.module == "_lockstep":
            for alias in node.names:
                imported[alias.asname or alias.name] = alias.name
    return definitions, imported


def document_module(reference, module, names, trees, level):
    """The names of `module` (an imported module) in the order given, their stubs found in trees[0] or, for names it
    re-exports from the extension, in trees[1]."""
    definitions, imported = stub_definitions(trees[0])
    extension = stub_definitions(trees[1])[0] if len(trees) > 1 else {}
    errors = [e for e in names if e not in definitions and e not in imported]
    if errors:
        raise SystemExit(f"python_api_reference: no stub for {module.__name__}.{', '.join(errors)}")
    for name in names:
        nodes = definitions.get(name) or extension[imported[name]]
        obj = getattr(module, name)
        qualified = f"{module.__name__}.{name}"
        node = nodes[0]
        if isinstance(node, ast.ClassDef):
            reference.klass(qualified, obj, node, level)
        elif isinstance(node, ast.FunctionDef):
            overloads = [n for n in nodes if "overload" in decorators(n)] or nodes
            reference.function(qualified, obj, overloads, level)
        elif isinstance(node, ast.AnnAssign):
            reference.lines += [
                "",
                f"{'#' * level} `{qualified}: {ast.unparse(node.annotation)}`",
                "",
                CONSTANTS.get(qualified, ""),
            ]
        else:  # an alias: name = other
            reference.lines += [
                "",
                f"{'#' * level} `{qualified}`",
                "",
                f"The same class as `{ast.unparse(node.value)}`.",
            ]


def error_table(reference, lockstep, names):
    reference.lines += [
        "",
        "## Exceptions",
        "",
        "Every failing status code of the C interface (`lockstep.h`) is one class: `.status` is the code,"
        " `.name` its name. All derive from `lockstep.Error`, a `RuntimeError`.",
        "",
        "| Class | Also a | Status | When |",
        "|---|---|---|---|",
    ]
    for name in names:
        cls = getattr(lockstep, name)
        extra = ", ".join(
            f"`{b.__module__}.{b.__name__}`".replace("builtins.", "") for b in cls.__bases__ if b is not lockstep.Error
        )
        if not cls.__doc__:
            reference.undocumented.append(f"lockstep.{name}")
        reference.lines.append(f"| `lockstep.{name}` | {extra} | `{cls.name}` | {cls.__doc__ or ''} |")


def build(package_dir):
    sys.path.insert(0, package_dir)
    lockstep = importlib.import_module("lockstep")
    trees = [stub_tree(package_dir, "__init__"), stub_tree(package_dir, "_lockstep")]
    reference = Reference()
    reference.lines += [
        TITLE,
        "",
        "Generated by `tools/python_api_reference.py` from the package's type stubs (`bindings/python/lockstep/*.pyi`:",
        "arguments, defaults, return types) and its docstrings (what each does and raises); `meson test",
        "python_api_reference` fails when this file is out of date. Arrays (`_Array`, `_T`) are anything the package",
        "takes without a copy: buffer-protocol objects (numpy arrays, `bytearray`, `memoryview`), DLPack producers",
        "(torch, cupy, jax) and `lockstep.Tensor`; a collective called with `async_op=True` returns a",
        "`lockstep.Request`.",
        "",
        "## lockstep",
    ]
    reference.lines += ["", inspect.cleandoc(lockstep.__doc__).split("\n\n")[0]]
    errors = [
        n
        for n in lockstep.__all__
        if isinstance(getattr(lockstep, n), type) and issubclass(getattr(lockstep, n), lockstep.Error) and n != "Error"
    ]
    document_module(reference, lockstep, [n for n in lockstep.__all__ if n not in errors], trees, 3)
    error_table(reference, lockstep, errors)

    reference.lines += ["", "## lockstep.torch", ""]
    try:
        torch_module = importlib.import_module("lockstep.torch")
    except ImportError as error:
        raise SystemExit(f"python_api_reference: lockstep.torch cannot be imported ({error}); it needs torch")
    reference.lines.append(inspect.cleandoc(torch_module.__doc__).split("\n\n")[0])
    document_module(reference, torch_module, torch_module.__all__, [stub_tree(package_dir, "torch")], 3)
    return "\n".join(reference.lines) + "\n", reference.undocumented


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("package_dir")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--output", help="write the reference to this file")
    group.add_argument("--check", help="exit 1 with a diff when this file differs from the reference")
    options = parser.parse_args()
    text, undocumented = build(os.path.abspath(options.package_dir))
    status = 0
    if undocumented:
        print(
            "python_api_reference: public names without a docstring:\n  " + "\n  ".join(undocumented), file=sys.stderr
        )
        status = 1
    if options.check:
        with open(options.check, encoding="utf-8") as f:
            current = f.read()
        if current != text:
            sys.stdout.writelines(
                difflib.unified_diff(current.splitlines(True), text.splitlines(True), options.check, "generated")
            )
            print(
                f"python_api_reference: {options.check} is out of date: regenerate it with\n"
                f"  /usr/bin/python3 tools/python_api_reference.py {options.package_dir} --output {options.check}",
                file=sys.stderr,
            )
            status = 1
    elif options.output:
        with open(options.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
