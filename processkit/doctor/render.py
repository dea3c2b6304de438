"""The doctor report for a person: the same facts as ``--json``, one labelled line each;
every value that came from outside is sanitized."""

from __future__ import annotations

from ..cli.output import cell


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def render(report: dict, limit_backend: str | None) -> list[str]:
    """The same facts for a person; every value that came from outside is sanitized."""
    verdict = "qualified" if report["qualified"] else "NOT qualified"
    lines = [f"processkit-cli {report['version']} on {report['os']}: {verdict} ({report['elapsed_ms']}ms)"]
    facts = []
    registry = report["registry"]
    if registry is not None:
        facts.append(("registry", f"{cell(registry['dir'])} (owner-only: {_yes(registry['owner_only'])}, {registry['protection']})"))
    containment = report["containment"]
    if containment is not None:
        facts.append(("containment", f"{cell(containment['mechanism'])} (abrupt cleanup: {cell(containment['abrupt_cleanup'])})"))
    control = report["control"]
    if control is not None:
        source = control["terminal_source"]
        facts.append((
            "control",
            f"{cell(control['endpoint'])} ({control['transport']}); inspect saw {control['inspected_members']} member(s), "
            f"cancel acknowledged: {_yes(control['cancel_acknowledged'])}, "
            + (f"run ended with source {cell(source)}" if source else "run ended without a terminal event"),
        ))
    cleanup = report["cleanup"]
    if cleanup is not None:
        inconclusive = "" if cleanup["teardown_snapshot_conclusive"] else ", post-kill snapshot inconclusive here"
        facts.append((
            "cleanup",
            f"confirmed empty: {_yes(cleanup['confirmed_empty'])} (remaining: {cell(cleanup['remaining'])}{inconclusive}); "
            f"record removed: {_yes(cleanup['registry_record_removed'])}, "
            f"endpoint released: {_yes(cleanup['endpoint_released'])}, scratch removed: {_yes(cleanup['scratch_removed'])}",
        ))
    resources = report["resource_controller"]
    if resources is not None:
        how = f"via {limit_backend}" if limit_backend else cell(resources["detail"])
        facts.append(("resources", f"{resources['requested']} enforceable: {_yes(resources['available'])} ({how})"))
    facts.append(("phases", ", ".join(f"{p['phase']} {'' if p['ok'] else 'FAILED '}{p['elapsed_ms']}ms" for p in report["phases"])))
    facts += [("failure", cell(failure)) for failure in report["failures"]]
    facts += [("mismatch", cell(mismatch)) for mismatch in report["mismatches"]]
    if report["diagnostics_dir"] is not None:
        facts.append(("diagnostics", f"kept in {cell(report['diagnostics_dir'])}"))
    return lines + [f"  {label + ':':<13}{text}" for label, text in facts]
