"""Reproductions of the papers' findings: paper value beside simulated value (docs/repro.md)."""

from __future__ import annotations

import click

#: The reproductions, by name.
PAPERS: dict[str, str] = {}


@click.group(invoke_without_command=True)
@click.option("--list", "list_", is_flag=True, help="List the reproductions.")
@click.pass_context
def repro(ctx: click.Context, list_: bool) -> None:
    """Reproduce a paper's findings: paper value beside vmmu's (`vmmu repro --list`)."""
    if ctx.invoked_subcommand is None:
        for name, title in PAPERS.items():
            click.echo(f"{name}  {title}")
