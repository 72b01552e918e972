"""The inspector's HTML page: one self-contained file (:func:`render`).

Everything is inline: styles, a small script, charts drawn as SVG here, and each session's
result texts (originals and the forms the model saw) as gzip + base64 in a
``<script type="application/octet-stream">`` per result, decoded with the browser's
``DecompressionStream`` only when that result is opened, so a session of thousands of messages stays a page the browser
opens at once. A Content-Security-Policy forbids any request: the page works from disk, offline.

Every figure that ``toolkeep replay --json`` prints is written with ``data-k`` (its path in that
document, e.g. ``sessions.0.with.cost``) and ``data-v`` (its value), so the page can be checked
against the JSON.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Sequence
from html import escape
from typing import Any

from .. import __version__
from .collect import SessionTrace

__all__ = ["render"]

_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

_STYLE = """
:root{--fg:#1d2330;--muted:#5d6678;--line:#d9dde5;--bg:#fff;--band:#f5f7fa;--wo:#8a93a6;--wi:#1f5fbf;
--read:#9cc3f0;--write:#f2b46d;--unc:#d97a7a}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg);margin:0}main{max-width:1180px;margin:0 auto;padding:18px 22px 60px}
h1{font-size:21px;margin:4px 0 2px}h2{font-size:18px;margin:30px 0 8px;padding-top:12px;border-top:2px solid var(--line)}
h3{font-size:15px;margin:18px 0 6px}.muted{color:var(--muted)}code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;margin:6px 0 10px;width:100%}th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--band);font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:19px}.good{color:#17803d}.bad{color:#b42318}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border-radius:2px}
svg{display:block;max-width:100%;height:auto}svg text{font:11px system-ui,sans-serif;fill:var(--muted)}
button{font:inherit;font-size:12px;padding:1px 8px;border:1px solid var(--line);border-radius:4px;background:var(--band);cursor:pointer}
button:hover{border-color:var(--wi)}tr.panel>td{background:#fbfcfe;padding:10px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:12px}.pair pre{margin:4px 0;max-height:480px;overflow:auto;white-space:pre-wrap;
word-break:break-word;border:1px solid var(--line);border-radius:4px;padding:8px;background:#fff}
.forms button.on{background:var(--wi);color:#fff}.reason{color:var(--muted);font-size:12.5px}
details>summary{cursor:pointer;color:var(--wi)}.name{word-break:break-all}
"""

_SCRIPT = r"""
"use strict";
const blobs = {};
function texts(id) {
  if (!blobs[id]) {
    const text = atob(document.getElementById(id).textContent.trim());
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    blobs[id] = new Response(stream).json();
  }
  return blobs[id];
}
function pre(text, cls) { const p = document.createElement("pre"); p.className = cls; p.textContent = text; return p; }
async function openResult(button) {
  const row = button.closest("tr");
  const next = row.nextElementSibling;
  if (next && next.classList.contains("panel")) { next.remove(); button.textContent = "open"; return; }
  const forms = await texts(button.dataset.blob);
  const moves = JSON.parse(button.dataset.moves);
  const panel = document.createElement("tr"); panel.className = "panel";
  const cell = document.createElement("td"); cell.colSpan = row.children.length; panel.appendChild(cell);
  const pair = document.createElement("div"); pair.className = "pair";
  const left = document.createElement("div"), right = document.createElement("div");
  const bar = document.createElement("div"); bar.className = "forms";
  const seen = pre("", "seen");
  const label = document.createElement("div"); label.className = "reason";
  moves.forEach((m, n) => {
    const b = document.createElement("button");
    b.textContent = "request " + m[0] + ": " + m[1];
    b.addEventListener("click", () => {
      bar.querySelectorAll("button").forEach(x => x.classList.remove("on")); b.classList.add("on");
      seen.textContent = forms[m[2]];
      label.textContent = forms[m[2]].length.toLocaleString() + " chars" + (m[3] ? " \u2014 " + m[3] : "");
    });
    bar.appendChild(b);
    if (n === moves.length - 1) b.click();
  });
  const h1 = document.createElement("h3"); h1.textContent = "What the model saw";
  left.append(h1, bar, label, seen);
  const h2 = document.createElement("h3"); h2.textContent = "Original (" + forms[0].length.toLocaleString() + " chars)";
  right.append(h2, pre(forms[0], "original"));
  pair.append(left, right); cell.appendChild(pair);
  row.after(panel); button.textContent = "close";
}
function requestTable(details) {
  if (details.dataset.done) return;
  details.dataset.done = "1";
  const rows = JSON.parse(document.getElementById("rows-" + details.dataset.s).textContent);
  const t = document.createElement("table");
  t.innerHTML = "<thead><tr><th class=n>request</th><th class=n>messages</th><th class=n>sent without</th>" +
    "<th class=n>sent with</th><th class=n>cache read</th><th class=n>cache write</th><th class=n>uncached</th>" +
    "<th class=n>cost without</th><th class=n>cost with</th><th class=n>$ with</th></tr></thead>";
  const body = document.createElement("tbody");
  const f = v => v.toLocaleString("en-US");
  for (const r of rows) {
    const tr = document.createElement("tr");
    for (const v of [r[0], r[1], f(r[2]), f(r[8]), f(r[9]), f(r[10]), f(r[11]), r[6].toFixed(2), r[12].toFixed(2), r[13].toFixed(4)]) {
      const td = document.createElement("td"); td.className = "n"; td.textContent = v; tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  t.appendChild(body); details.appendChild(t);
}
document.addEventListener("click", e => {
  const b = e.target.closest("button[data-open]");
  if (b) openResult(b).catch(err => { console.error(err); });
});
document.querySelectorAll("details[data-s]").forEach(d => d.addEventListener("toggle", () => { if (d.open) requestTable(d); }));
"""


def render(document: dict[str, Any], traces: Sequence[SessionTrace]) -> str:
    """The page for the ``replay --json`` ``document`` of sessions whose replays ``traces`` recorded."""
    sessions = document["sessions"]
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f"<title>toolkeep inspect: {len(sessions)} session{'' if len(sessions) == 1 else 's'}</title>",
        f"<style>{_STYLE}</style></head><body><main>",
    ]
    out += _overview(document)
    for n, (session, trace) in enumerate(zip(sessions, traces, strict=True)):
        out += _session(n, session, trace, document["unit"])
    out.append(f"<script>{_SCRIPT}</script></main></body></html>")
    return "\n".join(out)


def _fig(path: str, value: Any, text: str | None = None, cls: str = "n") -> str:
    shown = text if text is not None else _fmt(value)
    return (
        f'<td class={cls} data-k="{escape(path)}" data-v="{escape(json.dumps(value))}">{escape(shown)}</td>'
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _card(title: str, path: str, value: Any, text: str, cls: str = "") -> str:
    return (
        f'<div class=card>{escape(title)}<b class="{cls}" data-k="{escape(path)}" '
        f'data-v="{escape(json.dumps(value))}">{escape(text)}</b></div>'
    )


def _tone(ratio: float | None) -> str:
    return "" if ratio is None else "good" if ratio < 0.995 else "bad" if ratio > 1.005 else ""


def _overview(document: dict[str, Any]) -> list[str]:
    total, model = document["total"], document["cost_model"]
    sessions = document["sessions"]
    pricing = model["pricing"]
    out = [
        "<h1>toolkeep inspect</h1>",
        f"<p class=muted>{len(sessions)} recorded session{'' if len(sessions) == 1 else 's'} replayed through "
        f"toolkeep {escape(__version__)}: policy <b data-k=policy data-v='{escape(json.dumps(document['policy']))}'>"
        f"{escape(document['policy'])}</b>, pricing <b>{escape(pricing)}</b>, counted in {escape(document['unit'])}. "
        "Cost is in base-input-token units (a token sent uncached costs 1), dollars at each list's base input "
        "price. The model's replies are as recorded: this shows what toolkeep would have sent.</p>",
        "<h2 id=overview>Overview</h2><div class=cards>",
        _card("tokens sent, with / without", "total.ratios.tokens", total["ratios"]["tokens"],
              _ratio(total["ratios"]["tokens"]), _tone(total["ratios"]["tokens"])),
        _card("cost, with / without", "total.ratios.cost", total["ratios"]["cost"], _ratio(total["ratios"]["cost"]),
              _tone(total["ratios"]["cost"])),
        _card("dollars with toolkeep", "total.with.dollars.total", total["with"]["dollars"]["total"],
              f"${total['with']['dollars']['total']:,.2f}"),
        _card("dollars without", "total.without.dollars.total", total["without"]["dollars"]["total"],
              f"${total['without']['dollars']['total']:,.2f}"),
        _card("requests", "total.turns", total["turns"], f"{total['turns']:,}"),
        _card("repairs", "", sum(total["repairs"].values()), f"{sum(total['repairs'].values()):,}"),
        "</div>",
        "<h3>Totals</h3><table><thead><tr><th></th><th class=n>tokens sent</th><th class=n>peak (sum)</th>"
        "<th class=n>cache reads</th><th class=n>cache writes</th><th class=n>uncached</th><th class=n>cost</th>"
        "<th class=n>dollars</th></tr></thead><tbody>",
    ]  # fmt: skip
    out += _sides("total", total, peak=True)
    out.append("</tbody></table>")
    results, rec = total["results"], total["recoverable"]
    out.append(
        "<p>Results in the sessions' last requests: "
        + ", ".join(
            f"{results.get(k, 0):,} {k}" for k in ("total", "capped", "persisted", "truncated", "summarized")
        )
        + f". Markers recallable: {rec.get('recallable', 0):,} of {rec.get('markers', 0):,}. Repairs: "
        + (", ".join(f"{v:,} {k}" for k, v in total["repairs"].items()) or "none")
        + ".</p>"
    )
    ranked = sorted(
        range(len(sessions)),
        key=lambda n: -(sessions[n]["ratios"]["cost"] if sessions[n]["ratios"]["cost"] is not None else -1),
    )
    out.append(
        "<h3>Worst sessions</h3><p class=muted>Where toolkeep saved least: the highest cost with over without.</p>"
    )
    out += _session_table(sessions, ranked[: min(5, len(sessions))], "worst")
    out.append("<h3>Sessions</h3>")
    out += _session_table(sessions, list(range(len(sessions))), "all")
    out.append(
        "<h3>Prices used</h3><table><thead><tr><th>list</th><th class=n>cache read</th><th class=n>cache write</th>"
        "<th class=n>TTL s</th><th class=n>$ / MTok input</th><th class=n>sessions</th></tr></thead><tbody>"
    )
    for name, p in model.get("pricing_lists", {}).items():
        count = sum(1 for s in sessions if (s.get("pricing") or {}).get("name") == name)
        out.append(
            f"<tr><td>{escape(name)}</td><td class=n>{p.get('cache_read')}x</td><td class=n>{p.get('cache_write')}x</td>"
            f"<td class=n>{p.get('ttl_seconds')}</td><td class=n>{p.get('input_price_per_mtok')}</td><td class=n>{count}</td></tr>"
        )
    out.append(
        "</tbody></table><p class=muted>Each session is priced with its agent's provider's list unless "
        "<code>--pricing</code> named one; the policy decides with the same list.</p>"
    )
    return out


def _sides(path: str, figures: dict[str, Any], *, peak: bool) -> list[str]:
    """The rows without and with toolkeep of a totals table."""
    out = []
    for side, label in (("without", "without toolkeep"), ("with", "with toolkeep")):
        t = figures[side]
        keys = ("tokens", "peak_tokens", "cache_read_tokens", "cache_write_tokens", "uncached_tokens", "cost")
        cells = "".join(_fig(f"{path}.{side}.{key}", t[key]) for key in keys if peak or key != "peak_tokens")
        dollars = _fig(
            f"{path}.{side}.dollars.total", t["dollars"]["total"], f"${t['dollars']['total']:,.4f}"
        )
        out.append(f"<tr><th>{label}</th>{cells}{dollars}</tr>")
    return out


def _session_table(sessions: list[dict[str, Any]], order: list[int], tag: str) -> list[str]:
    out = [
        f"<table class=sessions-{tag}><thead><tr><th>session</th><th>format</th><th>pricing</th><th class=n>requests</th>"
        "<th class=n>tokens without</th><th class=n>tokens with</th><th class=n>\u00d7</th><th class=n>cost without</th>"
        "<th class=n>cost with</th><th class=n>\u00d7</th><th class=n>$ with</th><th class=n>repairs</th></tr></thead><tbody>"
    ]
    for n in order:
        s = sessions[n]
        p = f"sessions.{n}"
        out.append(
            f"<tr><td class=name><a href='#s-{n}'>{escape(_name(s['source']))}</a></td><td>{escape(s['format'])}</td>"
            f"<td>{escape((s.get('pricing') or {}).get('name', ''))}</td>"
            + _fig(f"{p}.turns", s["turns"])
            + _fig(f"{p}.without.tokens", s["without"]["tokens"])
            + _fig(f"{p}.with.tokens", s["with"]["tokens"])
            + _fig(f"{p}.ratios.tokens", s["ratios"]["tokens"], _ratio(s["ratios"]["tokens"]))
            + _fig(f"{p}.without.cost", s["without"]["cost"])
            + _fig(f"{p}.with.cost", s["with"]["cost"])
            + _fig(f"{p}.ratios.cost", s["ratios"]["cost"], _ratio(s["ratios"]["cost"]))
            + _fig(
                f"{p}.with.dollars.total",
                s["with"]["dollars"]["total"],
                f"${s['with']['dollars']['total']:,.4f}",
            )
            + f"<td class=n>{sum(s['repairs'].values()):,}</td></tr>"
        )
    out.append("</tbody></table>")
    return out


def _name(source: str) -> str:
    return source.replace("\\", "/").rsplit("/", 1)[-1]


def _session(n: int, s: dict[str, Any], trace: SessionTrace, unit: str) -> list[str]:
    p = f"sessions.{n}"
    pricing = s.get("pricing") or {}
    out = [
        f"<section id='s-{n}'><h2 class=name>{escape(_name(s['source']))}</h2>",
        f"<p class=muted><span class=mono>{escape(s['source'])}</span> \u00b7 {escape(s['format'])} log, "
        f"{s['messages']:,} messages \u00b7 policy {escape(s['policy'])} \u00b7 priced at "
        f"<b>{escape(pricing.get('name', ''))}</b> ({escape(s.get('pricing_source', ''))}: read "
        f"{pricing.get('cache_read')}x, write {pricing.get('cache_write')}x, TTL {pricing.get('ttl_seconds')} s)</p>",
        "<div class=cards>",
        _card("tokens sent, with / without", f"{p}.ratios.tokens", s["ratios"]["tokens"],
              _ratio(s["ratios"]["tokens"]), _tone(s["ratios"]["tokens"])),
        _card("cost, with / without", f"{p}.ratios.cost", s["ratios"]["cost"], _ratio(s["ratios"]["cost"]),
              _tone(s["ratios"]["cost"])),
        _card("peak context with", f"{p}.with.peak_tokens", s["with"]["peak_tokens"], f"{s['with']['peak_tokens']:,}"),
        _card("peak context without", f"{p}.without.peak_tokens", s["without"]["peak_tokens"],
              f"{s['without']['peak_tokens']:,}"),
        _card("requests", f"{p}.turns", s["turns"], f"{s['turns']:,}"),
        "</div>",
    ]  # fmt: skip
    out.append(
        "<table><thead><tr><th></th><th class=n>tokens sent</th><th class=n>cache reads</th><th class=n>cache writes</th>"
        "<th class=n>uncached</th><th class=n>cost</th><th class=n>dollars</th></tr></thead><tbody>"
    )
    out += _sides(p, s, peak=False)
    out.append("</tbody></table>")
    if trace.rows:
        out.append(f"<h3>Requests</h3><p class=muted>Input per request, in {escape(unit)}.</p>")
        out.append(_timeline(trace.rows))
        out.append(_costs(trace.rows))
        out.append(
            f"<details data-s={n}><summary>every request as a table ({len(trace.rows):,})</summary></details>"
            f"<script type=application/json id=rows-{n}>{_json(trace.rows)}</script>"
        )
    out += _results(n, trace)
    out += _repairs(trace)
    out.append("</section>")
    return out


def _json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


_W, _L, _R, _T, _B = 1100, 64, 12, 10, 26


def _axes(n: int, top: float, height: int, label: str) -> list[str]:
    plot_h = height - _T - _B
    out = [f'<line x1={_L} y1={height - _B} x2={_W - _R} y2={height - _B} stroke="#9aa3b2"/>']
    for frac in (0.5, 1.0):
        y = height - _B - plot_h * frac
        out.append(f'<line x1={_L} y1={y:.1f} x2={_W - _R} y2={y:.1f} stroke="#eceff4"/>')
        out.append(f"<text x={_L - 6} y={y + 4:.1f} text-anchor=end>{escape(_short(top * frac))}</text>")
    out.append(f"<text x={_L - 6} y={height - _B + 4} text-anchor=end>0</text>")
    out.append(f"<text x={_L} y={height - 8}>request 1</text>")
    out.append(f"<text x={_W - _R} y={height - 8} text-anchor=end>request {n:,}</text>")
    out.append(f"<text x={(_L + _W) / 2:.0f} y={height - 8} text-anchor=middle>{escape(label)}</text>")
    return out


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.0f}K"
    return f"{value:.0f}"


def _xy(rows: Sequence[Sequence[Any]], values: Sequence[float], top: float, height: int) -> list[str]:
    n = len(rows)
    span = _W - _L - _R
    plot_h = height - _T - _B
    step = span / max(n - 1, 1)
    return [
        f"{_L + i * step:.1f},{height - _B - (v / top if top else 0) * plot_h:.1f}"
        for i, v in enumerate(values)
    ]


def _timeline(rows: Sequence[Sequence[Any]]) -> str:
    """Tokens sent per request: without and with as lines, with's cache reads, writes and uncached
    input stacked beneath."""
    height = 250
    top = max(max(r[2] for r in rows), max(r[8] for r in rows), 1)
    base = [0.0] * len(rows)
    parts = [f'<svg viewBox="0 0 {_W} {height}" role=img aria-label="tokens per request">']
    parts += _axes(len(rows), top, height, "tokens sent per request")
    for column, color in ((9, "#9cc3f0"), (10, "#f2b46d"), (11, "#d97a7a")):
        upper = [b + r[column] for b, r in zip(base, rows, strict=True)]
        points = _xy(rows, upper, top, height) + list(reversed(_xy(rows, base, top, height)))
        parts.append(f'<polygon points="{" ".join(points)}" fill="{color}" fill-opacity=0.75 stroke="none"/>')
        base = upper
    parts.append(
        f'<polyline points="{" ".join(_xy(rows, [r[2] for r in rows], top, height))}" fill=none '
        'stroke="#8a93a6" stroke-width=1.5 stroke-dasharray="5 3"/>'
    )
    parts.append(
        f'<polyline points="{" ".join(_xy(rows, [r[8] for r in rows], top, height))}" fill=none '
        'stroke="#1f5fbf" stroke-width="1.6"/>'
    )
    parts.append("</svg>")
    legend = (
        "<div class='legend muted'><span><i class=sw style='background:var(--wo)'></i>sent without toolkeep</span>"
        "<span><i class=sw style='background:var(--wi)'></i>sent with toolkeep</span>"
        "<span><i class=sw style='background:var(--read)'></i>with: cache reads</span>"
        "<span><i class=sw style='background:var(--write)'></i>with: cache writes</span>"
        "<span><i class=sw style='background:var(--unc)'></i>with: uncached input</span></div>"
    )
    return "".join(parts) + legend


def _costs(rows: Sequence[Sequence[Any]]) -> str:
    """Cost per request (base-input-token units), without and with."""
    height = 170
    top = max(max(r[6] for r in rows), max(r[12] for r in rows), 1)
    parts = [f'<svg viewBox="0 0 {_W} {height}" role=img aria-label="cost per request">']
    parts += _axes(len(rows), top, height, "cost per request (base-input-token units)")
    for column, style in ((6, 'stroke="#8a93a6" stroke-dasharray="5 3"'), (12, 'stroke="#1f5fbf"')):
        parts.append(
            f'<polyline points="{" ".join(_xy(rows, [r[column] for r in rows], top, height))}" fill=none '
            f'{style} stroke-width="1.5"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _results(n: int, trace: SessionTrace) -> list[str]:
    lives = sorted(trace.results.values(), key=lambda life: (life.message, life.id))
    out = [f"<h3>Results shortened ({len(lives):,})</h3>"]
    if not lives:
        out.append("<p class=muted>No result was sent shorter than its original.</p>")
        return out
    out.append(
        "<p class=muted>Each result that was ever sent shorter: how it entered the history, each form it "
        "moved to (at which request, and why), and its archive key. <b>open</b> shows what the model saw "
        "beside the original.</p>"
    )
    out.append(
        f"<table class=results id=results-{n}><thead><tr><th>result</th><th>tool</th><th class=n>message</th>"
        "<th>entered</th><th>forms</th><th class=n>original chars</th><th>key</th><th></th></tr></thead><tbody>"
    )
    blobs = []
    for k, life in enumerate(lives):
        packed = gzip.compress(_json(life.forms).encode("utf-8"), compresslevel=6, mtime=0)
        blobs.append(
            f"<script type=application/octet-stream id=b-{n}-{k}>{base64.b64encode(packed).decode()}</script>"
        )
        moves = "".join(
            f"<div>request {m.request}: <b>{escape(m.kind)}</b> \u2192 {m.chars:,} chars"
            + (f"<div class=reason>{escape(m.reason)}</div>" if m.reason else "")
            + "</div>"
            for m in life.moves
        )
        data = _json([[m.request, m.kind, m.form, m.reason] for m in life.moves])
        entered = (
            life.entered if life.entered == "whole" else f"{life.entered} at request {life.first_request}"
        )
        out.append(
            f"<tr><td class=mono>{escape(life.id)}</td><td>{escape(life.tool)}</td><td class=n>{life.message:,}</td>"
            f"<td>{escape(entered)}</td><td>{moves}</td><td class=n>{life.original_chars:,}</td>"
            f'<td class=mono>{escape(life.key or "")}</td><td><button data-s={n} data-blob=b-{n}-{k} data-open="{escape(life.id)}" '
            f'data-moves="{escape(data)}">open</button></td></tr>'
        )
    out.append("</tbody></table>")
    out += blobs
    return out


def _repairs(trace: SessionTrace) -> list[str]:
    out = [f"<h3>Repairs ({len(trace.repairs):,})</h3>"]
    if not trace.repairs:
        out.append("<p class=muted>The history needed no repair.</p>")
        return out
    out.append(
        "<table class=repairs><thead><tr><th class=n>first at request</th><th>kind</th><th>call id</th>"
        "<th class=n>message</th><th>what</th></tr></thead><tbody>"
    )
    for r in trace.repairs:
        out.append(
            f"<tr><td class=n>{r['request']:,}</td><td>{escape(r['kind'])}</td><td class=mono>{escape(r['id'])}</td>"
            f"<td class=n>{r['message']:,}</td><td>{escape(r['detail'] or _REPAIRS.get(r['kind'], ''))}</td></tr>"
        )
    out.append("</tbody></table>")
    return out


_REPAIRS = {
    "synthetic": "a call without a result got a synthetic error result",
    "orphans_removed": "a result without its call was removed",
    "duplicates_pruned": "a duplicate call id was pruned",
    "relocated": "a displaced result moved back next to its call",
    "renamed": "an id the provider refuses was renamed, with its result",
    "invalid_calls_pruned": "a call the provider would refuse was pruned",
    "empty_assistant_dropped": "an empty assistant message was dropped",
    "blank_text_dropped": "a blank text block was dropped",
}
