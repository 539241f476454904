"""The report page's stylesheet, inlined into the page (one module constant, no external asset)."""

from __future__ import annotations

from typing import Final

CSS: Final = """
:root {
  --ink: #1f2430; --muted: #6b7280; --line: #e5e7eb; --paper: #ffffff; --bg: #f5f6f8;
  --good: #2f9e5a; --bad: #d64545; --warn: #c98a12; --blue: #3b7dd8;
  --completed: #2f9e5a; --truncated: #3b7dd8; --aborted: #e69b23; --missing: #9aa3ad;
  --raised: #d64545; --timed-out: #8e5cc7; --unknown: #6b7280;
  --network: #3b82f6; --process: #ef4444; --semantic: #a855f7; --other: #64748b;
}
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 64px; background: var(--bg); color: var(--ink);
  font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
a { color: var(--blue); text-decoration: none; }
a:hover { text-decoration: underline; }
header.page h1 { margin: 0 0 2px; font-size: 24px; letter-spacing: -0.01em; }
.meta, .muted { color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 16px 0 20px; }
.card { background: var(--paper); border: 1px solid var(--line); border-radius: 10px; padding: 10px 16px;
  min-width: 120px; }
.card .num { font-size: 24px; font-weight: 650; }
.card .what { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card.good .num { color: var(--good); }
.card.bad .num { color: var(--bad); }
.card.warn .num { color: var(--warn); }
table { border-collapse: collapse; width: 100%; background: var(--paper); }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em;
  font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.index { border: 1px solid var(--line); border-radius: 10px; overflow: hidden; margin-bottom: 28px; }
.chip { display: inline-block; margin: 1px 3px 1px 0; padding: 0 7px; border-radius: 9px; font-size: 11px;
  border: 1px solid currentColor; }
.chip.pass { color: var(--good); } .chip.fail { color: var(--bad); background: #fdeeee; }
.chip.unknown { color: var(--warn); background: #fdf6e7; }
.chip.not_judged { color: var(--unknown); border-style: dashed; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 6px; font-size: 12px; font-weight: 700;
  letter-spacing: .04em; color: #fff; vertical-align: 2px; }
.badge.passed { background: var(--good); } .badge.failed, .badge.error { background: var(--bad); }
.badge.skipped { background: var(--missing); }
section.scenario { background: var(--paper); border: 1px solid var(--line);
  border-left: 5px solid var(--good);
  border-radius: 10px; padding: 14px 20px 18px; margin: 0 0 22px; }
section.scenario.failed, section.scenario.error { border-left-color: var(--bad); }
section.scenario.skipped { border-left-color: var(--missing); }
section.scenario h2 { margin: 0 0 4px; font-size: 18px; }
.where { margin: 0 0 8px; color: var(--muted); font-family: ui-monospace, Menlo, monospace;
  font-size: 12px; }
.tag { display: inline-block; background: #eef2f7; color: #475569; border-radius: 4px; padding: 0 6px;
  font-family: inherit; }
.description { margin: 6px 0; max-width: 980px; }
.upstream, .outcome { margin: 6px 0; }
.problems { background: #fdeeee; border: 1px solid #f3c9c9; border-radius: 8px; padding: 6px 12px;
  margin: 8px 0; }
.problems ul { margin: 4px 0; padding-left: 20px; }
.problems.untested { background: #f3f4f6; border: 1px dashed var(--unknown); }
.schedule { margin: 8px 0; } .schedule ol { margin: 4px 0; padding-left: 22px; }
table.verdicts { margin: 10px 0 14px; border: 1px solid var(--line); }
table.verdicts { table-layout: fixed; }
table.verdicts th:nth-child(1) { width: 200px; } table.verdicts th:nth-child(2) { width: 90px; }
table.verdicts td:first-child { overflow-wrap: anywhere; }
tr.fail td { background: #fff7f7; }
tr.evidence td { border-top: 0; padding-top: 0; }
tr.evidence pre { background: #fff; border: 1px solid #f0d5d5; border-radius: 6px; padding: 6px 8px; }
tr.unknown td { background: #fffbef; }
.status { font-weight: 700; font-size: 12px; } .status.pass { color: var(--good); }
.status.fail { color: var(--bad); } .status.unknown { color: var(--warn); }
.status.not_judged { color: var(--unknown); } tr.not_judged td { color: var(--muted); }
details summary { cursor: pointer; color: var(--muted); font-size: 12px; }
details.message { margin-top: 10px; }
details.message pre { background: #f8f9fb; padding: 8px; border-radius: 6px; }
figure.picture { margin: 8px 0 0; overflow-x: auto; }
figcaption { margin-top: 4px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: var(--muted); }
.key { display: inline-flex; align-items: center; gap: 5px; }
.swatch { display: inline-block; width: 18px; height: 10px; border-radius: 3px; }
.swatch.completed { background: var(--completed); } .swatch.truncated { background: var(--truncated); }
.swatch.aborted { background: var(--aborted); } .swatch.missing { background: var(--missing); }
.swatch.raised { background: var(--raised); } .swatch.timed-out { background: var(--timed-out); }
.swatch.band-network { background: rgba(59,130,246,.22); border: 1px solid var(--network); }
.swatch.band-process { background: rgba(239,68,68,.18); border: 1px solid var(--process); }
.swatch.band-semantic { background: rgba(168,85,247,.18); border: 1px solid var(--semantic); }
.glyph { font-style: normal; font-weight: 700; }
.glyph.retry { color: var(--aborted); } .glyph.fail, .glyph.exit { color: var(--bad); }
.glyph.tick, .glyph.end { color: var(--muted); } .glyph.effect { color: var(--semantic); }
.empty { color: var(--muted); font-style: italic; }
dl.run { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 12px 0 0;
  background: var(--paper); border: 1px solid var(--line); border-radius: 10px; padding: 10px 16px; }
dl.run dt { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
  padding-top: 1px; }
dl.run dd { margin: 0; overflow-wrap: anywhere; }
.bad { color: var(--bad); }
.filter { margin: 0 0 10px; }
.filter label { cursor: pointer; user-select: none; }
body:has(#only-failing:checked) section.scenario.passed,
body:has(#only-failing:checked) section.scenario.skipped,
body:has(#only-failing:checked) table.index tr.passed,
body:has(#only-failing:checked) table.index tr.skipped { display: none; }
section.logs { background: var(--paper); border: 1px solid var(--line); border-radius: 10px;
  padding: 10px 20px; }
section.logs h2 { font-size: 16px; margin: 4px 0 6px; }
section.logs ul { margin: 0; padding-left: 18px; }
section.logs code { overflow-wrap: anywhere; }
.why { color: var(--bad); font-size: 12px; margin-top: 2px; }
@media (max-width: 640px) {
  body { padding: 14px 12px 40px; }
  dl.run { grid-template-columns: 1fr; padding: 8px 12px; }
  dl.run dd { margin-bottom: 6px; }
  .cards { display: grid; grid-template-columns: repeat(2, 1fr); gap: 8px; }
  .card { min-width: 0; padding: 8px 12px; }
  table.index thead { display: none; }
  table.index tr { display: grid; grid-template-columns: auto 1fr auto; gap: 0 8px; padding: 6px 8px;
    border-bottom: 1px solid var(--line); }
  table.index td { border: 0; padding: 0; }
  table.index td:nth-child(4) { display: none; }
  table.index td:nth-child(5) { grid-column: 1 / -1; padding-top: 4px; }
  section.scenario { padding: 12px 12px 14px; }
  table.verdicts thead { display: none; }
  table.verdicts tr { display: grid; grid-template-columns: 1fr auto; }
  table.verdicts td { border: 0; }
  table.verdicts tr:not(.evidence) td:nth-child(3) { grid-column: 1 / -1; padding-top: 0;
    border-bottom: 1px solid var(--line); }
  table.verdicts tr.evidence td:first-child { display: none; }
  table.verdicts tr.evidence td { grid-column: 1 / -1; }
}
/* the timeline picture */
svg.timeline { display: block; font: 11px -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
svg.timeline text { fill: var(--ink); }
svg.timeline .stripe { fill: #f7f8fa; }
svg.timeline .grid { stroke: #eceef1; stroke-width: 1; }
svg.timeline .axis { stroke: #9aa3ad; stroke-width: 1; }
svg.timeline .tick-label, svg.timeline .axis-title, svg.timeline .note { fill: var(--muted); }
svg.timeline .lane-label { fill: #374151; font-family: ui-monospace, Menlo, monospace; font-size: 11px; }
svg.timeline .lane-label.strong { font-weight: 700; font-family: inherit; }
svg.timeline .band .band-fill { fill-opacity: .13; }
svg.timeline .band .band-edge { stroke-width: 1.2; stroke-opacity: .7; }
svg.timeline .band.network .band-fill { fill: var(--network); }
svg.timeline .band.network .band-edge { stroke: var(--network); }
svg.timeline .band.process .band-fill { fill: var(--process); }
svg.timeline .band.process .band-edge { stroke: var(--process); }
svg.timeline .band.semantic .band-fill { fill: var(--semantic); }
svg.timeline .band.semantic .band-edge { stroke: var(--semantic); }
svg.timeline .band.other .band-fill { fill: var(--other); }
svg.timeline .band.other .band-edge { stroke: var(--other); }
svg.timeline .band .band-label { font-weight: 600; }
svg.timeline .band.network .band-label { fill: #1d4ed8; }
svg.timeline .band.process .band-label { fill: #b91c1c; }
svg.timeline .band.semantic .band-label { fill: #7e22ce; }
svg.timeline .band.failed .band-edge { stroke-dasharray: 3 2; }
svg.timeline .collect rect { fill: #94a3b8; } svg.timeline .collect.ok rect { fill: var(--good); }
svg.timeline .collect.fail rect { fill: var(--bad); }
svg.timeline .span rect { stroke-width: 1; }
svg.timeline .span.completed rect { fill: var(--completed); }
svg.timeline .span.truncated rect { fill: var(--truncated); }
svg.timeline .span.aborted rect { fill: var(--aborted); }
svg.timeline .span.missing rect { fill: var(--missing); }
svg.timeline .span.raised rect { fill: var(--raised); }
svg.timeline .span.timed-out rect { fill: var(--timed-out); }
svg.timeline .span.unknown rect { fill: var(--unknown); }
svg.timeline .span.ok rect { fill-opacity: .9; }
svg.timeline .span.fail rect { fill-opacity: .55; stroke: var(--bad); }
svg.timeline .span.cancelled rect { fill-opacity: .35; stroke: #6b7280; stroke-dasharray: 2 2; }
svg.timeline .span.open rect { fill-opacity: .3; stroke: #6b7280; stroke-dasharray: 4 2; }
svg.timeline .hatch { fill: rgba(0,0,0,.12); }
svg.timeline .cross { stroke: var(--bad); stroke-width: 2; fill: none; }
svg.timeline .mark.retry circle { fill: #fff; stroke: var(--aborted); stroke-width: 2; }
svg.timeline .mark.repair rect { fill: #fff; stroke: var(--truncated); stroke-width: 1.5; }
svg.timeline .mark.effect path { fill: var(--semantic); stroke: #fff; stroke-width: .8; }
svg.timeline .mark.turn circle { fill: #fff; fill-opacity: .9; }
svg.timeline .mark.tick line { stroke: #8b95a1; stroke-width: 1; }
svg.timeline .mark.tick.fail line { stroke: var(--bad); stroke-width: 1.5; }
svg.timeline .pill rect { fill-opacity: .15; stroke-width: 1; }
svg.timeline .pill text { text-anchor: middle; font-size: 10.5px; font-weight: 600; }
svg.timeline .pill.completed rect { fill: var(--completed); stroke: var(--completed); }
svg.timeline .pill.completed text { fill: #1e7a44; }
svg.timeline .pill.truncated rect { fill: var(--truncated); stroke: var(--truncated); }
svg.timeline .pill.truncated text { fill: #2559a8; }
svg.timeline .pill.aborted rect { fill: var(--aborted); stroke: var(--aborted); }
svg.timeline .pill.aborted text { fill: #9a5d00; }
svg.timeline .pill.missing rect { fill: var(--missing); stroke: var(--missing); stroke-dasharray: 3 2; }
svg.timeline .pill.missing text { fill: #4b5563; }
svg.timeline .pill.raised rect { fill: var(--raised); stroke: var(--raised); }
svg.timeline .pill.raised text { fill: #a12a2a; }
svg.timeline .pill.timed-out rect { fill: var(--timed-out); stroke: var(--timed-out); }
svg.timeline .pill.timed-out text { fill: #6a3aa3; }
svg.timeline .pill.unknown rect { fill: var(--unknown); stroke: var(--unknown); }
svg.timeline .marker line { stroke: var(--bad); stroke-width: 1.5; stroke-dasharray: 5 3; }
svg.timeline .marker path { fill: var(--bad); }
svg.timeline .marker text { fill: #b91c1c; font-weight: 600; }
svg.timeline .marker.restart line { stroke: var(--good); }
svg.timeline .marker.restart path { fill: var(--good); }
svg.timeline .marker.restart text { fill: #1e7a44; }
svg.timeline .marker.step line { stroke: var(--blue); }
svg.timeline .marker.step path { fill: var(--blue); }
svg.timeline .marker.step text { fill: var(--blue); }
svg.timeline .end line { stroke: #374151; stroke-width: 1; stroke-dasharray: 2 3; }
svg.timeline .deadline line { stroke: var(--timed-out); stroke-width: 1.5; stroke-dasharray: 6 3; }
svg.timeline .deadline text { fill: var(--timed-out); font-weight: 600; }
"""
