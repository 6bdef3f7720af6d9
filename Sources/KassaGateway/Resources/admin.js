"use strict";
/* Kassa's support page. A session's timeline is drawn as a waterfall: a time axis in ms since
   the session's first event, each upstream call as a bar as long as it took (its retries on the
   same row, with the waits between them), commands and pushes as markers, the session's states
   as a band on top. The first problem is explained in plain words above it. A session has a link
   (#session=<id>) that carries no token: the token is typed in and kept in sessionStorage. The
   timeline can be exported as JSON or CSV, built here from the data the page holds.
   No libraries. The page runs under a CSP without 'unsafe-inline': positions are set through
   element.style (the CSSOM), which that policy allows, never through style attributes. */

const TOKEN_KEY = "kassa.adminToken";
const isSessionID = (id) => typeof id === "string" && /^[0-9a-f]{1,64}$/.test(id);

// ---- Plain words -------------------------------------------------------------------------

/** What each known problem type means, for support staff. Keys: Kassa's urn:kassa:problem:*
    names, the SDK problem names, and the last part of Swedbank Pay's errordetail URLs. */
const PROBLEM_WORDS = {
  // Kassa's own (urn:kassa:problem:<name>)
  "command-not-allowed": "the client sent a command the session's state does not take; nothing changed",
  "instrument-not-available": "the client chose a payment instrument this session does not offer",
  "bad-request": "Kassa refused a malformed request or stream frame",
  "unauthorized": "a request came without a valid token or key",
  "token-expired": "the client's token had expired; only a new session helps",
  "not-found": "the request named something Kassa does not have",
  "method-not-allowed": "the request used an HTTP method the path does not take",
  "payload-too-large": "the request body was larger than Kassa accepts",
  "length-required": "the request body came without a Content-Length",
  "unsupported-media-type": "the request body was not JSON",
  "service-unavailable": "Kassa was shutting down or not ready",
  "internal-error": "Kassa failed internally",
  "rate-limited": "the caller sent too many requests and was asked to slow down",
  "capacity": "Kassa was at its limit of sessions or WebSockets",
  "idempotency-conflict": "a request with the same Idempotency-Key was still running",
  "idempotency-key-reused": "an Idempotency-Key was reused for a different request",
  "origin-not-allowed": "a web page on an origin Kassa does not allow tried to open the stream",
  "payment-order-not-v3": "Swedbank Pay created a v2 payment order, which has no payment session",
  // The SDKs' problem names (SdkProblemOccurred)
  "PaymentSessionAPIRequestFailed": "a call to Swedbank Pay failed; the client may send retry",
  "PaymentSession3DSecureLoadFailed": "the 3-D Secure page could not be shown on the payer's device",
  "PaymentSessionEndReached": "nothing more can happen in this session, so it ended",
  "AbortPaymentNotAllowed": "the payment could no longer be aborted",
  // Swedbank Pay's (…/psp/errordetail/…/<name>)
  "paymentattemptdeclined": "the payment was declined (by the card issuer, or in Swish)",
  "usercancelled": "the payer cancelled",
  "clientapplaunchfailed": "the payment app (Swish) could not be opened on the payer's device",
  "technicalerror": "Swedbank Pay reported a technical error",
  "operationnotallowed": "Swedbank Pay does not allow that operation in the session's current state",
  "inputerror": "Swedbank Pay rejected a field of the request",
  "systemerror": "Swedbank Pay failed internally",
  "forbidden": "Swedbank Pay refused access",
  "notfound": "Swedbank Pay does not know the resource",
  "gatewaytimeout": "Swedbank Pay did not answer in time",
  "badgateway": "Swedbank Pay's answer could not be used",
};

/** What an upstream HTTP status means, as "Swedbank Pay …". */
const STATUS_WORDS = {
  400: "rejected the request as invalid", 401: "refused Kassa's credentials", 403: "refused access",
  404: "did not know the resource", 409: "said it conflicts with the session's current state",
  415: "did not accept the body's media type", 422: "could not process the request",
  429: "asked Kassa to slow down", 500: "failed internally", 502: "had a gateway error",
  503: "was unavailable", 504: "timed out behind its own gateway",
};

/** What each PaymentSession operation does, in a few words. */
const OPERATION_WORDS = {
  "create-paymentorder": "creating the payment order", "view-paymentsession": "reading the session",
  "prepare-payment": "preparing the payment", "expand-method": "opening the payment method",
  "start-payment-attempt": "starting the payment", "create-authentication": "starting 3-D Secure",
  "complete-authentication": "finishing 3-D Secure", "get-payment": "checking the payment's status",
  "acknowledge-failed-attempt": "acknowledging a failed attempt", "abort-payment": "aborting the payment",
  "customize-payment": "setting up the payment menu", "attempt-payload": "sending the wallet payment",
  "fail-payment-attempt": "reporting a failed attempt", "launch-client-app": "launching the payment app",
  "set-instrument": "choosing the instrument",
};

function problemName(type) {
  if (!type) return "";
  const s = String(type);
  if (s.startsWith("urn:kassa:problem:")) return s.slice("urn:kassa:problem:".length);
  const parts = s.split("/").filter(Boolean);
  return parts.length ? parts[parts.length - 1] : s;
}
function problemWords(type) { return PROBLEM_WORDS[problemName(type)] || PROBLEM_WORDS[type] || null; }
function operationLabel(op) { return OPERATION_WORDS[op] ? `${op} (${OPERATION_WORDS[op]})` : op; }

function isProblemPush(e) { return e.kind === "push.sent" && /ProblemOccurred$/.test(e.summary || ""); }
function isFailedResponse(e) { return e.kind === "upstream.response" && (e.status == null || e.status >= 400); }
/** An event that says something went wrong. */
function isProblem(e) {
  return e.level === "error" || e.level === "warning" || e.kind === "problem" || isProblemPush(e);
}

// ---- Formatting --------------------------------------------------------------------------

function fmtMs(ms) {
  if (ms == null || isNaN(ms)) return "";
  const a = Math.abs(ms);
  if (a < 1) return ms.toFixed(2) + " ms";
  if (a < 10) return ms.toFixed(1) + " ms";
  if (a < 1000) return Math.round(ms) + " ms";
  if (a < 10000) return (ms / 1000).toFixed(2) + " s";
  if (a < 120000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}
/** A time since the session's first event, for the rows: whole ms below a second. */
function fmtAt(ms) { return "+" + (Math.abs(ms) < 1000 ? Math.round(ms) + " ms" : fmtMs(ms)); }
function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}
function fmtTick(v, step) {
  if (step >= 1000 || v >= 1000) {
    const d = Math.max(0, Math.ceil(-Math.log10(step / 1000) - 1e-9));
    return (v / 1000).toFixed(d) + " s";
  }
  const d = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
  return v.toFixed(d) + " ms";
}
function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || one + "s")}`; }
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}
const byId = (id) => document.getElementById(id);

// ---- The model: rows of a waterfall from a list of events ------------------------------

/** Turns events (in time order) into the waterfall's rows, the state band and the marker lane. */
function buildModel(events) {
  const start = events.length ? events[0].atMs : 0;
  const rows = [], states = [], lane = [];
  const open = [];              // exchanges whose response has not been seen
  const retrying = new Map();   // operation → the row whose next request is a retry
  const connections = new Map();
  let end = 0, state = null, unpaired = 0, noDuration = 0;
  for (const e of events) {
    const t = e.atMs - start;
    const d = e.data || {};
    end = Math.max(end, t);
    switch (e.kind) {
    case "upstream.request": {
      const op = d.operation || "upstream";
      const x = { request: e, response: null, op, method: d.method || "", path: d.path || "", startMs: t, durationMs: 0, attempt: 1 };
      let row = retrying.get(op);
      if (row) { retrying.delete(op); x.attempt = row.exchanges.length + 1; x.retry = true; }
      else { row = { type: "call", op, method: x.method, exchanges: [], waits: [], events: [], startMs: t }; rows.push(row); }
      x.row = row; row.exchanges.push(x); row.events.push(e); open.push(x);
      break;
    }
    case "upstream.response": {
      const op = d.operation || "upstream";
      // No id links a response to its request: the oldest open request of the same operation,
      // method and path (and node) is its request.
      const node = e.node ?? null;
      const sameNode = (x) => (x.request.node ?? null) === node;
      let i = open.findIndex((x) => sameNode(x) && x.op === op && x.method === (d.method || "") && x.path === (d.path || ""));
      if (i < 0) i = open.findIndex((x) => sameNode(x) && x.op === op);
      let x;
      if (i >= 0) x = open.splice(i, 1)[0];
      else {
        // The response without its request (written before retention, or on another node).
        unpaired++;
        const s = Math.max(0, t - (e.durationMs || 0));
        const row = { type: "call", op, method: d.method || "", exchanges: [], waits: [], events: [], startMs: s, unpaired: true };
        x = { request: null, op, method: d.method || "", path: d.path || "", startMs: s, attempt: 1, row };
        row.exchanges.push(x); rows.push(row);
      }
      x.response = e; x.row.events.push(e);
      if (e.durationMs != null) x.durationMs = e.durationMs;
      else { x.durationMs = Math.max(0, t - x.startMs); x.estimated = true; noDuration++; }
      x.status = e.status;
      x.failed = e.status == null || e.status >= 400;
      x.error = d.error || null;
      end = Math.max(end, x.startMs + x.durationMs);
      break;
    }
    case "upstream.retry": {
      const op = d.operation || "upstream";
      let row = null;
      for (let i = rows.length - 1; i >= 0; i--) if (rows[i].type === "call" && rows[i].op === op) { row = rows[i]; break; }
      const wait = { startMs: t, durationMs: Number(d.delayMs) || 0, event: e };
      end = Math.max(end, t + wait.durationMs);
      if (row) { row.waits.push(wait); row.events.push(e); retrying.set(op, row); }
      else rows.push({ type: "problem", startMs: t, events: [e], wait });
      break;
    }
    case "state.transition": {
      if (!state) state = { state: d.from || "starting", startMs: 0 };
      state.endMs = t; states.push(state);
      state = { state: d.to || "?", startMs: t, event: e };
      break;
    }
    case "ws.open": {
      const row = { type: "conn", startMs: t, events: [e], connection: d.connection, durationMs: null };
      connections.set(d.connection, row); rows.push(row);
      break;
    }
    case "ws.close": {
      const row = connections.get(d.connection);
      if (row && row.durationMs == null) { row.events.push(e); row.durationMs = t - row.startMs; row.code = d.code; }
      else rows.push({ type: "conn", startMs: t, durationMs: 0, events: [e], code: d.code, closeOnly: true });
      break;
    }
    case "http.request": {
      // Written when the answer went out: it began durationMs earlier.
      const dur = e.durationMs || 0;
      const s = Math.max(0, t - dur);
      rows.push({ type: "http", startMs: s, durationMs: t - s, events: [e], status: e.status });
      break;
    }
    case "client.command": {
      const row = { type: "command", startMs: t, events: [e] };
      rows.push(row); lane.push(row);
      break;
    }
    case "push.sent": {
      const row = { type: "push", startMs: t, events: [e], problem: isProblemPush(e) };
      rows.push(row); lane.push(row);
      break;
    }
    case "problem":
      rows.push({ type: "problem", startMs: t, events: [e] });
      break;
    case "upstream.circuit":  // opening is a problem; closing again is good news
      rows.push({ type: d.open === false ? "other" : "problem", startMs: t, events: [e] });
      break;
    default:
      rows.push({ type: "other", startMs: t, events: [e] });
    }
  }
  if (state) { state.endMs = end; states.push(state); }
  for (const x of open) { x.open = true; x.durationMs = Math.max(0, end - x.startMs); }
  for (const r of rows) {
    if (r.type === "conn" && r.durationMs == null) { r.durationMs = Math.max(0, end - r.startMs); r.stillOpen = true; }
    if (r.type === "call") {
      const last = r.exchanges[r.exchanges.length - 1];
      r.endMs = Math.max(...r.exchanges.map((x) => x.startMs + x.durationMs), ...r.waits.map((w) => w.startMs + w.durationMs));
      r.failed = !!(last.failed || last.open);
      r.tries = r.exchanges.length;
      r.anyFailed = r.exchanges.some((x) => x.failed);
    } else r.endMs = r.startMs + (r.durationMs || (r.wait ? r.wait.durationMs : 0));
    r.node = r.events.map((e) => e.node).find((n) => n != null && n !== "") || null;
    r.problem = r.problem || (r.type === "call" && r.anyFailed) || r.type === "problem" ||
      (r.type === "http" && r.status >= 500) || r.events.some((e) => e.level === "error");
  }
  rows.sort((a, b) => a.startMs - b.startMs);  // stable: equal starts keep the log's order
  return { start, end, rows, states, lane, unpaired, noDuration, openCalls: open.length };
}

// ---- The time scale ----------------------------------------------------------------------

const BREAK_PX = 64;        // how wide a cut idle gap is drawn
const MIN_GAP_MS = 5000;    // idle gaps shorter than this are never cut (get-payment polls every 2 s)

/** Maps ms since the first event to % of the track. Linear, one scale for everything, except
    that long idle gaps (nothing logged, no call in flight) may be cut to BREAK_PX each: a
    payer typing a 3-D Secure code or a restart must not squeeze the calls into one pixel.
    Bars never cross a cut, so a bar's width stays proportional to its duration. */
function makeScale(model, from, to, widthPx, cut) {
  const spans = [];
  const add = (a, b) => { if (b >= from && a <= to) spans.push([Math.max(a, from), Math.min(b, to)]); };
  for (const r of model.rows) {
    if (r.type === "call") {
      for (const x of r.exchanges) add(x.startMs, x.startMs + x.durationMs);
      for (const w of r.waits) add(w.startMs, w.startMs + w.durationMs);
    } else if (r.type === "http") add(r.startMs, r.endMs);
    else if (r.type === "problem" && r.wait) add(r.wait.startMs, r.wait.startMs + r.wait.durationMs);
    else if (r.type === "conn") { add(r.startMs, r.startMs); if (!r.stillOpen) add(r.startMs + r.durationMs, r.startMs + r.durationMs); }
    else add(r.startMs, r.startMs);
  }
  for (const st of model.states) add(st.startMs, st.startMs);
  add(from, from); add(to, to);
  spans.sort((a, b) => a[0] - b[0]);
  const gaps = [];
  let reach = spans.length ? spans[0][1] : from;
  for (const [a, b] of spans) {
    if (a - reach > MIN_GAP_MS) gaps.push([reach, a]);
    reach = Math.max(reach, b);
  }
  const maxBreaks = Math.max(0, Math.floor(widthPx / 4 / BREAK_PX));
  let breaks = cut ? gaps.filter(([a, b]) => b - a > (to - from) * 0.08).sort((x, y) => (y[1] - y[0]) - (x[1] - x[0])).slice(0, maxBreaks) : [];
  breaks.sort((x, y) => x[0] - y[0]);
  // Each cut gap, drawn BREAK_PX wide, stands for g ms of the linear scale.
  const real = to - from - breaks.reduce((n, [a, b]) => n + (b - a), 0);
  const share = (breaks.length * BREAK_PX) / widthPx;
  const g = breaks.length ? (BREAK_PX / widthPx) * real / Math.max(0.05, 1 - share) : 0;
  // 2 % more on the right, so that the last marker is not cut in half by the edge.
  const total = Math.max((real + g * breaks.length) * 1.02, 1e-6);
  const segments = [];
  let at = from, v = 0;
  for (const [a, b] of breaks) {
    segments.push({ from: at, to: a, v0: v, v1: v + (a - at), cut: false });
    v += a - at;
    segments.push({ from: a, to: b, v0: v, v1: v + g, cut: true });
    v += g; at = b;
  }
  segments.push({ from: at, to, v0: v, v1: v + (to - at), cut: false });
  const pos = (ms) => {
    let s = segments[0];
    if (ms >= from) for (const x of segments) { s = x; if (ms <= x.to) break; }
    const f = s.to > s.from ? (ms - s.from) / (s.to - s.from) : 0;
    return ((s.cut ? s.v0 + f * (s.v1 - s.v0) : s.v0 + (ms - s.from)) / total) * 100;
  };
  const at_ = (percent) => {
    const vv = (percent / 100) * total;
    for (const x of segments) if (vv <= x.v1 || x === segments[segments.length - 1]) {
      const f = x.v1 > x.v0 ? (vv - x.v0) / (x.v1 - x.v0) : 0;
      return x.from + f * (x.to - x.from);
    }
    return to;
  };
  return { from, to, pos, at: at_, segments, breaks, total, msPerTrack: total };
}

// ---- The first problem, in plain words --------------------------------------------------

/** How one failed exchange ended, in a word or two: "503", "timed out", "circuit breaker open". */
function shortOutcome(e) {
  if (e.status != null) return String(e.status);
  const err = String((e.data || {}).error || e.summary || "");
  if (/circuit breaker open/.test(err)) return "circuit breaker open";
  if (/timed out/.test(err)) return "timed out";
  if (/cannot connect/.test(err)) return "unreachable";
  if (/connection lost/.test(err)) return "connection lost";
  if (/larger than/.test(err)) return "answer too large";
  return "error";
}

/** A failed exchange of `op` as a sentence's start: "Swedbank Pay answered 503 (…) to op". */
function failureClause(e, op) {
  const what = operationLabel(op);
  if (e.status != null) {
    const body = (e.data || {}).body;
    const type = body && typeof body === "object" && body.type ? problemName(body.type) : null;
    const words = STATUS_WORDS[e.status];
    const why = words ? ` (${words}${type ? ": " + type : ""})` : (type ? ` (${type})` : "");
    return { lead: `Swedbank Pay answered ${e.status}${why} to ${what}`, status: true };
  }
  switch (shortOutcome(e)) {
  case "circuit breaker open": return { lead: `Kassa did not call Swedbank Pay for ${what}: its circuit breaker was open after repeated failures` };
  case "timed out": return { lead: `Swedbank Pay did not answer ${what} in time (Kassa waited ${fmtMs(e.durationMs)})`, status: true };
  case "unreachable": return { lead: `Swedbank Pay could not be reached for ${what}` };
  case "connection lost": return { lead: `Swedbank Pay dropped the connection during ${what}` };
  case "answer too large": return { lead: `Swedbank Pay's answer to ${what} was larger than Kassa accepts` };
  default: return { lead: `${what} failed: ${(e.data || {}).error || e.summary}` };
  }
}

/** What the client was told, from a problem push. */
function toldWords(push) {
  const p = (push.data || {}).problem || {};
  const name = problemName(p.type);
  if (push.summary === "SessionProblemOccurred") {
    return `the client was told the attempt failed (${name}${p.detail ? `: “${p.detail}”` : ""}); a new attempt may follow`;
  }
  const retryable = (push.data || {}).retryable ?? p.retryable;
  if (retryable) return `the client was told to retry (${name})`;
  if (name === "PaymentSessionEndReached") return `the session ended for the client (${name})`;
  const words = problemWords(p.type);
  return words ? `the client was told ${words} (${name})` : `the client was told (${name})`;
}

/** The first problem of a session, explained: {text, eventId, atMs, toMs}, or null. */
function explainFirstProblem(events, session) {
  const i = events.findIndex(isProblem);
  if (i < 0) return null;
  const p = events[i];
  const start = events[0].atMs;
  const d = p.data || {};
  // The problem's chapter ends at the client's next command.
  let stop = events.findIndex((e, j) => j > i && e.kind === "client.command");
  if (stop < 0) stop = events.length;
  const chapter = events.slice(i, stop);
  const told = chapter.find(isProblemPush);
  let text, toMs = (told || p).atMs;

  let op = d.operation;
  if (!op && p.kind === "upstream.circuit") {
    const next = chapter.find((e) => e.data && e.data.operation && (isFailedResponse(e) || e.kind === "problem"));
    op = next && next.data.operation;
  }
  if (op && (p.kind.startsWith("upstream.") || p.kind === "problem")) {
    // An upstream call failed: count its tries, say how it ended.
    let first = i;
    for (let j = i; j >= 0; j--) if (events[j].kind === "upstream.request" && (events[j].data || {}).operation === op) { first = j; break; }
    let tries = 0, recovered = null;
    const failures = [];
    for (let j = first; j < stop; j++) {
      const e = events[j], ed = e.data || {};
      if (ed.operation !== op) continue;
      if (e.kind === "upstream.request") tries++;
      if (e.kind === "upstream.response") {
        if (isFailedResponse(e)) failures.push(e);
        else if (j > i) { recovered = e; break; }
      }
      if (e.kind === "problem" && (e.data || {}).retries != null) { tries = Math.max(tries, e.data.retries + 1); toMs = Math.max(toMs, e.atMs); }
    }
    const firstFailure = failures[0] || p;
    const clause = failures.length ? failureClause(firstFailure, op) : { lead: `${operationLabel(op)} failed` };
    text = clause.lead;
    if (tries > 1) text += clause.status ? ` after ${tries} tries` : ` (${tries} tries)`;
    const request = events.slice(first, i + 1).find((e) => e.kind === "upstream.request");
    if (tries === 1 && request && (request.data || {}).method === "POST" && (firstFailure.status == null || firstFailure.status >= 500)) {
      text += " (Kassa does not resend a POST: it may already have taken effect)";
    }
    const counts = new Map();
    for (const f of failures) counts.set(shortOutcome(f), (counts.get(shortOutcome(f)) || 0) + 1);
    if (counts.size > 1) text += ` (${[...counts].map(([k, n]) => `${k} ×${n}`).join(", ")})`;
    if (recovered) {
      text += `; try ${tries} succeeded (${recovered.status}), so the payer was not affected`;
      toMs = recovered.atMs;
    } else if (told) {
      text += `; ${toldWords(told)}`;
    } else if (p.status === 409) {
      text += "; Kassa read the session again, as the SDKs do";
    } else {
      text += "; the client has not been told";
    }
  } else if (isProblemPush(p)) {
    const prob = d.problem || {};
    const name = problemName(prob.type);
    const words = problemWords(prob.type);
    if (name === "PaymentSession3DSecureLoadFailed") {
      text = `The 3-D Secure page could not be shown on the payer's device${prob.detail ? ` (“${prob.detail}”)` : ""}; ${toldWords(p)}`;
    } else if (p.summary === "SessionProblemOccurred") {
      text = `The payment attempt failed: ${words || name}${prob.detail ? ` (“${prob.detail}”)` : ""}; ${toldWords(p)}`;
    } else {
      text = `${words ? words[0].toUpperCase() + words.slice(1) : name}${prob.detail ? ` (“${prob.detail}”)` : ""}; ${toldWords(p)}`;
    }
  } else if (p.kind === "problem" && d.problem) {
    // A command Kassa refused.
    const prob = d.problem;
    let command = null;
    for (let j = i; j >= 0; j--) if (events[j].kind === "client.command") { command = (events[j].data || {}).command; break; }
    const name = problemName(prob.type);
    text = `Kassa refused the client's command${command ? ` “${command}”` : ""}: ${problemWords(prob.type) || prob.title || name}` +
      ` (${name}${prob.detail ? `: “${prob.detail}”` : ""})`;
  } else if (p.kind === "http.request") {
    text = `A client request was answered ${p.status}: ${p.summary}`;
  } else if (p.kind === "ws.close") {
    text = `The client's stream was closed: ${p.summary}`;
  } else {
    text = `${p.summary}${d.problem ? ` (${problemName(d.problem.type)})` : ""}`;
  }
  // What followed, in a few words.
  const later = events.slice(i + 1);
  const retries = later.filter((e) => e.kind === "client.command" && (e.data || {}).command === "retry").length;
  const morePushes = later.filter(isProblemPush).length - (told && told !== p ? 1 : 0);
  const after = [];
  if (retries) after.push(`the client sent retry ${retries} time${retries > 1 ? "s" : ""}`);
  if (morePushes > 0) after.push(`${morePushes} more problem${morePushes > 1 ? "s were" : " was"} pushed`);
  let afterText = after.length ? `Since then ${after.join(" and ")}` : "";
  if (session && session.state) afterText += `${afterText ? "; " : ""}the session is now ${session.state}`;
  if (afterText) afterText = afterText[0].toUpperCase() + afterText.slice(1) + ".";
  return { text: text + ".", after: afterText, eventId: p.id, atMs: p.atMs, sinceStartMs: p.atMs - start, toMs, kind: p.kind };
}

// ---- Export ----------------------------------------------------------------------------

const CSV_COLUMNS = ["at", "sinceStartMs", "sincePreviousMs", "kind", "level", "status", "durationMs", "seq", "operation", "node", "summary", "id"];
function csvCell(v) {
  if (v == null) return "";
  if (typeof v === "number") return String(v);
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = "'" + s;  // a spreadsheet must not read it as a formula
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}
function toCSV(events) {
  const lines = [CSV_COLUMNS.join(",")];
  for (const e of events) {
    const row = { ...e, operation: (e.data || {}).operation };
    lines.push(CSV_COLUMNS.map((c) => csvCell(row[c])).join(","));
  }
  return lines.join("\r\n") + "\r\n";
}
function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el("a");
  a.href = url; a.download = name; a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// ---- The page --------------------------------------------------------------------------

const admin = {
  socket: null, shown: new Set(), start: 0, previous: 0,
  current: null, session: null, events: [], model: null, range: null, selected: null,
  hidden: new Set(), renderTimer: null, pendingID: null,

  token() { return byId("token").value; },
  message(text) { byId("message").textContent = text; },

  async get(path) {
    let response, body = null;
    try {
      response = await fetch(path, { headers: { Authorization: "Bearer " + this.token() } });
      body = await response.json().catch(() => null);
    } catch (error) {
      this.message("Kassa cannot be reached: " + error.message);
      return null;
    }
    if (!response.ok) {
      if (response.status === 401) sessionStorage.removeItem(TOKEN_KEY);
      this.message(body ? `${body.title}: ${body.detail || ""}` : `HTTP ${response.status}`);
      return null;
    }
    this.message("");
    return body;
  },

  async find(all) {
    const params = new URLSearchParams();
    const value = byId("search").value.trim();
    if (!all && value) params.set(byId("field").value, value);
    const body = await this.get("/v1/admin/sessions?" + params);
    if (!body) return;
    const tbody = document.querySelector("#sessions tbody");
    tbody.textContent = "";
    for (const s of body.sessions) {
      const tr = this.row([s.created, s.id, s.state, s.payeeReference || "", s.msisdnSuffix ? "…" + s.msisdnSuffix : "", s.lastProblemType || ""]);
      tr.className = "session"; tr.dataset.session = s.id;
      tr.onclick = () => this.open(s.id);
      tbody.appendChild(tr);
    }
    if (body.sessions.length === 1) this.open(body.sessions[0].id);
  },

  async open(id) {
    if (!isSessionID(id)) { this.message(`“${id}” is not a session id`); return; }
    if (!this.token()) { this.ask(id); return; }
    const body = await this.get(`/v1/admin/sessions/${id}/timeline`);
    if (!body) { if (!this.token()) this.ask(id); return; }
    this.pendingID = null; byId("pending").hidden = true;
    sessionStorage.setItem(TOKEN_KEY, this.token());
    byId("sessionPanel").hidden = false;
    document.querySelector("#timeline tbody").textContent = "";
    this.shown = new Set();
    this.current = id; this.session = body.session; this.events = []; this.range = null; this.selected = null;
    this.start = body.events.length ? body.events[0].atMs : 0;
    this.previous = this.start;
    for (const e of body.events) this.add(e, true);
    byId("timelineTitle").textContent = `${id} (${body.session.state})`;
    const link = `${location.origin}${location.pathname}#session=${id}`;
    byId("shareLink").value = link;
    byId("copyStatus").textContent = "";
    if (location.hash !== `#session=${id}`) history.replaceState(null, "", `#session=${id}`);
    this.render();
    this.follow(id);
  },

  /** A link named a session, but there is no token yet: ask for it. */
  ask(id) {
    this.pendingID = id;
    byId("pendingId").textContent = id;
    byId("pending").hidden = false;
    byId("token").classList.add("wanted");
    byId("token").focus();
  },

  follow(id) {
    if (this.socket) { this.socket.onclose = null; this.socket.close(); }
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}/v1/admin/stream?session=${id}&token=${encodeURIComponent(this.token())}`, "kassa.v1");
    this.socket = socket;
    socket.onopen = () => { byId("live").textContent = "● live"; };
    socket.onmessage = (m) => { try { this.add(JSON.parse(m.data)); } catch (error) { /* not an event */ } };
    socket.onclose = () => {
      byId("live").textContent = "";
      if (this.socket === socket && this.current === id) setTimeout(() => { if (this.socket === socket) this.follow(id); }, 1000);
    };
  },

  /** One event: into the data the waterfall and the exports are made of, and into the table. */
  add(e, initial = false) {
    if (e.id == null || this.shown.has(e.id)) return;
    if (this.current && e.session && e.session !== this.current) return;
    this.shown.add(e.id);
    if (!this.start) { this.start = e.atMs; this.previous = e.atMs; }
    if (e.sinceStartMs == null) e.sinceStartMs = e.atMs - this.start;
    if (e.sincePreviousMs == null) e.sincePreviousMs = e.atMs - this.previous;
    let at = this.events.length;
    while (at > 0 && this.events[at - 1].atMs > e.atMs) at--;
    this.events.splice(at, 0, e);

    const summary = document.createElement("td");
    summary.textContent = e.summary;
    if (e.node != null && e.node !== "") summary.prepend(el("span", "node-badge", e.node));
    if (e.data && Object.keys(e.data).length) {
      const details = document.createElement("details");
      const s = document.createElement("summary"); s.textContent = e.kind.startsWith("upstream.") ? "exchange" : "details";
      const pre = document.createElement("pre"); pre.textContent = JSON.stringify(e.data, null, 2);
      details.append(s, pre); summary.appendChild(details);
    }
    const tr = this.row([e.atMs - this.start, e.atMs - this.previous, e.kind + (e.seq ? ` #${e.seq}` : "")], ["num", "num"]);
    tr.appendChild(summary);
    for (const v of [e.status ?? "", e.durationMs ?? ""]) { const td = document.createElement("td"); td.className = "num"; td.textContent = v; tr.appendChild(td); }
    const problem = e.level === "error" || e.kind === "problem" || /ProblemOccurred$/.test(e.summary);
    tr.className = problem ? "problem" : (e.level === "warning" ? "warning" : "");
    tr.dataset.kind = e.kind; tr.dataset.summary = e.summary; tr.dataset.eventId = e.id;
    this.previous = e.atMs;
    document.querySelector("#timeline tbody").appendChild(tr);
    if (e.kind === "state.transition" && e.data && e.data.to) {
      if (this.session) this.session.state = e.data.to;
      byId("timelineTitle").textContent = `${e.session || this.current} (${e.data.to})`;
    }
    if (!initial) this.scheduleRender();
  },

  row(values, classes = []) {
    const tr = document.createElement("tr");
    values.forEach((v, i) => { const td = document.createElement("td"); td.textContent = v; if (classes[i]) td.className = classes[i]; tr.appendChild(td); });
    return tr;
  },

  scheduleRender() {
    if (this.renderTimer) return;
    this.renderTimer = setTimeout(() => { this.renderTimer = null; this.render(); }, 80);
  },

  /** The timeline as exported: what the API answered, with the events received live since. */
  exportData() {
    const events = this.events;
    const duration = events.length ? events[events.length - 1].atMs - events[0].atMs : 0;
    return { session: this.session, durationMs: duration, exportedAt: new Date().toISOString(), events };
  },

  // ---- Rendering ----

  render() {
    this.model = buildModel(this.events);
    this.problem = explainFirstProblem(this.events, this.session);
    this.renderProblem();
    this.renderStats();
    this.renderWaterfall();
  },

  renderProblem() {
    const box = byId("firstProblem");
    box.textContent = "";
    const p = this.problem;
    box.className = p ? "problem-box" : "ok-box";
    byId("zoomProblem").hidden = !p;
    if (!p) {
      box.append(el("strong", null, "No problems: "), document.createTextNode("nothing in this session's event log is a warning or an error."));
      return;
    }
    box.append(el("strong", null, `First problem, at ${fmtAt(p.sinceStartMs)}: `), el("span", "problem-text", p.text));
    if (p.after) box.append(el("span", "problem-after", " " + p.after));
  },

  renderStats() {
    const m = this.model, rows = m.rows;
    const calls = rows.filter((r) => r.type === "call");
    const exchanges = calls.reduce((n, r) => n + r.exchanges.length, 0);
    const failed = calls.reduce((n, r) => n + r.exchanges.filter((x) => x.failed).length, 0);
    const retried = calls.filter((r) => r.tries > 1).length;
    const parts = [`${this.events.length} events over ${fmtMs(m.end)}`,
      `${exchanges} upstream exchange${exchanges === 1 ? "" : "s"} (${failed} failed, ${retried} call${retried === 1 ? "" : "s"} retried)`,
      plural(rows.filter((r) => r.type === "command").length, "command"), plural(rows.filter((r) => r.type === "push").length, "push", "pushes")];
    const nodes = [...new Set(this.events.map((e) => e.node).filter((n) => n != null && n !== ""))];
    if (nodes.length) parts.push(`nodes: ${nodes.join(", ")}`);
    const gaps = [];
    if (m.unpaired) gaps.push(`${m.unpaired} response${m.unpaired > 1 ? "s" : ""} without its request`);
    if (m.openCalls) gaps.push(`${m.openCalls} request${m.openCalls > 1 ? "s" : ""} without an answer yet (drawn to the end, hatched)`);
    if (m.noDuration) gaps.push(`${m.noDuration} response${m.noDuration > 1 ? "s" : ""} without a duration (estimated)`);
    byId("wfStats").textContent = parts.join(" · ") + (gaps.length ? ` · note: ${gaps.join("; ")}` : "");
  },

  /** Row text, the "took" column and the class of one row. */
  describe(r) {
    const e = r.events[0], d = e.data || {};
    switch (r.type) {
    case "call": {
      const last = r.exchanges[r.exchanges.length - 1];
      const status = last.open ? "no answer logged" : shortOutcome(last.response);
      return { icon: "⇄", text: `${r.method} ${r.op}`, chips: [[status, r.failed ? "chip bad" : (r.anyFailed ? "chip warn" : "chip")],
        ...(r.tries > 1 ? [[`${r.tries} tries`, "chip warn"]] : []), ...(r.unpaired ? [["request not logged", "chip warn"]] : [])],
      took: r.endMs - r.startMs, title: r.events.map((x) => x.summary).join("\n") };
    }
    case "command": return { icon: "▲", text: `command: ${d.command || e.summary}`, chips: d.source ? [[d.source, "chip"]] : [], title: e.summary };
    case "push": {
      const prob = d.problem ? problemName(d.problem.type) : null;
      return { icon: "●", text: `push #${e.seq ?? "?"} ${e.summary}`, chips: prob ? [[prob, "chip bad"]] : [], title: e.summary + (prob ? ` (${d.problem.type})` : "") };
    }
    case "problem": return { icon: "◆", text: e.summary, chips: [], title: e.summary, took: r.wait ? r.wait.durationMs : null };
    case "conn": return { icon: "↔", text: r.closeOnly ? `client stream closed (${r.code ?? "?"})` : `client stream${r.stillOpen ? " (still open)" : ` (closed ${r.code ?? ""})`}`,
      chips: [], took: r.durationMs, title: r.events.map((x) => x.summary).join("\n") };
    case "http": return { icon: "→", text: `client ${e.summary}`, chips: [], took: e.durationMs, title: e.summary };
    default: return { icon: "·", text: `${e.kind}: ${e.summary}`, chips: [], title: e.summary };
    }
  },

  renderWaterfall() {
    const root = byId("waterfall");
    root.textContent = "";
    const m = this.model;
    const full = Math.max(1, m.end);
    const from = this.range ? this.range.from : 0;
    const to = this.range ? this.range.to : full;
    byId("wfRange").textContent = this.range
      ? `Showing +${fmtMs(from)} to +${fmtMs(to)} of ${fmtMs(m.end)}.`
      : `Whole session: ${fmtMs(m.end)} from its first event to its last.`;
    byId("zoomReset").disabled = !this.range;

    const line = (cls) => {
      const row = el("div", "wf-row " + (cls || ""));
      const time = el("div", "wf-time"), label = el("div", "wf-label"), took = el("div", "wf-took"), track = el("div", "wf-track");
      row.append(time, label, took, track);
      return { row, time, label, took, track };
    };

    // The time axis, with ticks and labels; dragging across it zooms.
    const axis = line("wf-axis");
    axis.time.textContent = "+time";
    axis.label.textContent = "since the session's first event";
    axis.took.textContent = "took";
    root.appendChild(axis.row);
    const width = Math.max(200, axis.track.clientWidth || root.clientWidth - 560);
    const scale = makeScale(m, from, to, width, byId("cutGaps").checked);
    const pos = scale.pos;
    this.scale = scale;
    root.dataset.fromMs = from; root.dataset.toMs = to;
    root.dataset.scaleMs = scale.total;   // the ms of linear time the track's width stands for
    root.dataset.breaks = scale.breaks.length;
    const step = niceStep(scale.total / Math.max(2, Math.floor(width / 90)));
    const ticks = [];
    const clearPx = 34;  // no tick label this close to a cut or to another label
    for (const seg of scale.segments) {
      if (seg.cut) continue;
      for (let v = Math.ceil(seg.from / step - 1e-9) * step; v <= seg.to + 1e-9; v += step) {
        const x = pos(v);
        const near = scale.breaks.some(([a, b]) => Math.abs((pos(a) - x) / 100 * width) < clearPx || Math.abs((pos(b) - x) / 100 * width) < clearPx);
        if (!near) ticks.push(v);
      }
    }
    // After a cut, say where time resumes (when there is room), instead of the ticks right there.
    const resumed = [];
    for (const [, b] of scale.breaks) {
      const roomPx = (100 - pos(b)) / 100 * width;
      if (roomPx > 60) resumed.push(b);
    }
    const shown = ticks.filter((v) => !resumed.some((b) => v >= b && (pos(v) - pos(b)) / 100 * width < 80));
    for (const v of shown) {
      const x = pos(v);
      const tick = el("span", "wf-tick" + (x > 94 ? " end" : x < 3 ? " start" : ""), fmtTick(v, step));
      tick.style.left = x + "%";
      axis.track.appendChild(tick);
    }
    for (const b of resumed) {
      const tick = el("span", "wf-tick start resumed", fmtTick(b, b >= 1000 ? 100 : 1));
      tick.style.left = pos(b) + "%";
      axis.track.appendChild(tick);
    }
    for (const [a, b] of scale.breaks) {
      const cutMark = el("span", "wf-break", "≈ " + fmtMs(b - a));
      cutMark.style.left = pos(a) + "%"; cutMark.style.width = (pos(b) - pos(a)) + "%";
      cutMark.title = `${fmtMs(b - a)} with nothing logged (+${fmtMs(a)} to +${fmtMs(b)}), drawn short`;
      axis.track.appendChild(cutMark);
    }
    this.brush(axis.track, scale);

    // The session's states, as a band.
    const band = line("wf-states");
    band.time.textContent = "";
    band.label.textContent = "session state";
    for (const s of m.states) {
      if (s.endMs < from || s.startMs > to) continue;
      const seg = el("div", "wf-state state-" + s.state, s.state);
      const left = Math.max(0, pos(s.startMs)), right = Math.min(100, pos(s.endMs));
      seg.style.left = left + "%"; seg.style.width = Math.max(0, right - left) + "%";
      seg.title = `${s.state} from +${fmtMs(s.startMs)} for ${fmtMs(s.endMs - s.startMs)}`;
      seg.dataset.state = s.state;
      band.track.appendChild(seg);
    }
    root.appendChild(band.row);

    // Every command and push on one lane, under the axis.
    const lane = line("wf-lane");
    lane.label.textContent = "commands ▲ and pushes ●";
    for (const r of m.lane) {
      if (r.startMs < from || r.startMs > to) continue;
      const mk = el("span", `wf-marker m-${r.type}${r.problem ? " problem" : ""}`);
      mk.style.left = pos(r.startMs) + "%";
      mk.title = `+${fmtMs(r.startMs)} ${this.describe(r).text}`;
      lane.track.appendChild(mk);
    }
    root.appendChild(lane.row);

    const firstID = this.problem ? this.problem.eventId : null;
    let outside = 0, filtered = 0;
    for (const r of m.rows) {
      if (this.hidden.has(r.type)) { filtered++; continue; }
      if (r.endMs < from || r.startMs > to) { outside++; continue; }
      const info = this.describe(r);
      const cls = [`wf-${r.type}`];
      if (r.problem) cls.push("problem");
      if (r.type === "call" && r.tries > 1) cls.push("retried");
      if (r.events.some((e) => e.id === firstID)) cls.push("first");
      if (this.selected === r.events[0].id) cls.push("selected");
      const ln = line(cls.join(" "));
      ln.row.dataset.type = r.type;
      ln.row.dataset.kind = r.events[0].kind;
      ln.row.dataset.eventId = r.events[0].id;
      if (r.type === "call") { ln.row.dataset.operation = r.op; ln.row.dataset.tries = r.tries; }
      ln.time.textContent = fmtAt(r.startMs);
      ln.label.append(el("span", "wf-icon", info.icon), el("span", "wf-text", info.text));
      for (const [t, c] of info.chips) ln.label.appendChild(el("span", c, t));
      if (r.node) ln.label.appendChild(el("span", "node-badge", r.node));
      ln.label.title = info.title;
      if (info.took != null) ln.took.textContent = fmtMs(info.took);
      this.drawRow(ln.track, r, pos);
      ln.row.onclick = () => this.select(r);
      root.appendChild(ln.row);
    }
    if (outside || filtered) {
      const note = el("div", "wf-note", [outside ? `${outside} row${outside > 1 ? "s" : ""} outside the zoomed range` : "",
        filtered ? `${filtered} row${filtered > 1 ? "s" : ""} hidden by the legend's filters` : ""].filter(Boolean).join("; "));
      root.appendChild(note);
    }

    // Grid lines at the ticks, and a red line at the first problem, over the tracks.
    const grid = el("div", "wf-grid");
    for (const v of ticks) { const g = el("span", "wf-gridline"); g.style.left = pos(v) + "%"; grid.appendChild(g); }
    for (const [a, b] of scale.breaks) {
      const g = el("span", "wf-gridbreak");
      g.style.left = pos(a) + "%"; g.style.width = (pos(b) - pos(a)) + "%";
      grid.appendChild(g);
    }
    if (this.problem) {
      const x = pos(this.problem.sinceStartMs);
      if (x >= 0 && x <= 100) { const g = el("span", "wf-firstline"); g.style.left = x + "%"; g.title = "first problem"; grid.appendChild(g); }
    }
    root.appendChild(grid);
    this.renderDetail();
  },

  /** The bars and markers of one row. */
  drawRow(track, r, pos) {
    const bar = (startMs, durationMs, cls, title, extra) => {
      const b = el("div", "wf-bar " + cls);
      const left = pos(startMs), right = pos(startMs + durationMs);
      b.style.left = left + "%";
      b.style.width = Math.max(0, right - left) + "%";
      b.dataset.startMs = startMs; b.dataset.durationMs = durationMs;
      if (extra) Object.assign(b.dataset, extra);
      b.title = title;
      track.appendChild(b);
      return b;
    };
    const marker = (ms, cls, title) => {
      const mk = el("span", "wf-marker " + cls);
      mk.style.left = pos(ms) + "%";
      mk.title = title;
      track.appendChild(mk);
      return mk;
    };
    const e = r.events[0];
    switch (r.type) {
    case "call":
      for (const w of r.waits) bar(w.startMs, w.durationMs, "wait", `waited ${fmtMs(w.durationMs)} before retry ${(w.event.data || {}).retry ?? ""}`);
      for (const x of r.exchanges) {
        const cls = ["call", x.failed ? "failed" : "", x.retry ? "retry" : "", x.open ? "open" : "", x.estimated ? "estimated" : ""].filter(Boolean).join(" ");
        const title = `${x.method} ${x.op} ${x.open ? "— no answer logged" : "→ " + (x.status ?? (x.error || "error"))}` +
          `\nstarted +${fmtMs(x.startMs)}, took ${fmtMs(x.durationMs)}${x.attempt > 1 ? `\ntry ${x.attempt}` : ""}`;
        bar(x.startMs, x.durationMs, cls, title, { kind: "upstream", operation: x.op, status: x.status ?? "", attempt: x.attempt,
          responseId: x.response ? x.response.id : "" });
      }
      break;
    case "conn": bar(r.startMs, r.durationMs, "conn" + (r.stillOpen ? " open" : ""), r.events.map((x) => x.summary).join("\n")); break;
    case "http": bar(r.startMs, r.durationMs, "http" + (r.problem ? " failed" : ""), `${e.summary}, took ${fmtMs(e.durationMs)}`); break;
    case "command": marker(r.startMs, "m-command", `+${fmtMs(r.startMs)} ${e.summary}`); break;
    case "push": marker(r.startMs, "m-push" + (r.problem ? " problem" : ""), `+${fmtMs(r.startMs)} push #${e.seq} ${e.summary}`); break;
    case "problem":
      if (r.wait) bar(r.wait.startMs, r.wait.durationMs, "wait", e.summary);
      marker(r.startMs, "m-problem", `+${fmtMs(r.startMs)} ${e.summary}`);
      break;
    default: marker(r.startMs, "m-other", `+${fmtMs(r.startMs)} ${e.kind}: ${e.summary}`);
    }
  },

  /** Dragging across the axis zooms to that span. */
  brush(track, scale) {
    let x0 = null, box = null;
    track.onpointerdown = (ev) => {
      x0 = ev.clientX; track.setPointerCapture(ev.pointerId);
      box = el("div", "wf-brush"); track.appendChild(box);
    };
    track.onpointermove = (ev) => {
      if (x0 == null) return;
      const rect = track.getBoundingClientRect();
      const a = Math.max(rect.left, Math.min(x0, ev.clientX)), b = Math.min(rect.right, Math.max(x0, ev.clientX));
      box.style.left = ((a - rect.left) / rect.width) * 100 + "%";
      box.style.width = ((b - a) / rect.width) * 100 + "%";
    };
    track.onpointerup = (ev) => {
      if (x0 == null) return;
      const rect = track.getBoundingClientRect();
      const a = Math.max(0, Math.min(x0, ev.clientX) - rect.left), b = Math.min(rect.width, Math.max(x0, ev.clientX) - rect.left);
      x0 = null;
      if (b - a < 4) { box.remove(); return; }
      this.zoom(scale.at((a / rect.width) * 100), scale.at((b / rect.width) * 100));
    };
  },

  zoom(from, to) {
    this.range = to > from ? { from: Math.max(0, from), to } : null;
    this.renderWaterfall();
  },

  zoomToProblem() {
    const p = this.problem;
    if (!p) return;
    const a = p.atMs - this.start, b = Math.max(p.toMs - this.start, a);
    const pad = Math.max(5, (b - a) * 0.25, this.model.end * 0.02);
    this.zoom(Math.max(0, a - pad), b + pad);
  },

  select(r) {
    this.selected = this.selected === r.events[0].id ? null : r.events[0].id;
    for (const n of document.querySelectorAll("#waterfall .wf-row.selected")) n.classList.remove("selected");
    for (const n of document.querySelectorAll("#timeline tr.selected")) n.classList.remove("selected");
    if (this.selected != null) {
      const rowNode = document.querySelector(`#waterfall .wf-row[data-event-id="${this.selected}"]`);
      if (rowNode) rowNode.classList.add("selected");
      for (const e of r.events) {
        const tr = document.querySelector(`#timeline tr[data-event-id="${e.id}"]`);
        if (tr) tr.classList.add("selected");
      }
    }
    this.renderDetail();
  },

  renderDetail() {
    const box = byId("wfDetail");
    const r = this.selected != null ? this.model.rows.find((x) => x.events[0].id === this.selected) : null;
    box.hidden = !r;
    box.textContent = "";
    if (!r) return;
    box.appendChild(el("h4", null, this.describe(r).text));
    for (const e of r.events) {
      const item = el("div", "detail-event");
      item.append(el("span", "num", "+" + fmtMs(e.atMs - this.start)), el("code", null, e.kind),
        el("span", null, " " + e.summary + (e.durationMs != null ? ` (took ${fmtMs(e.durationMs)})` : "")));
      if (e.data && Object.keys(e.data).length) {
        const details = el("details");
        details.append(el("summary", null, "data"), el("pre", null, JSON.stringify(e.data, null, 2)));
        item.appendChild(details);
      }
      box.appendChild(item);
    }
  },

  async copyLink() {
    const input = byId("shareLink");
    const status = byId("copyStatus");
    try {
      await navigator.clipboard.writeText(input.value);
      status.textContent = "Link copied.";
    } catch (error) {
      input.focus(); input.select();
      let copied = false;
      try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
      status.textContent = copied ? "Link copied." : "Selected: press Ctrl+C (⌘C) to copy.";
    }
  },

  exportJSON() {
    if (!this.current) return;
    download(`kassa-session-${this.current}.json`, "application/json", JSON.stringify(this.exportData(), null, 2) + "\n");
  },

  exportCSV() {
    if (!this.current) return;
    download(`kassa-session-${this.current}.csv`, "text/csv;charset=utf-8", toCSV(this.events));
  },

  /** On load and when the address changes: #session=<id> opens that session. */
  fromHash() {
    const match = /^#session=([^&]*)/.exec(location.hash);
    if (!match) return;
    const id = decodeURIComponent(match[1]);
    if (id !== this.current) this.open(id);
  },
};

// ---- Wiring --------------------------------------------------------------------------

byId("find").onclick = () => admin.find(false);
byId("recent").onclick = () => admin.find(true);
byId("search").onkeydown = (e) => { if (e.key === "Enter") admin.find(false); };
byId("token").oninput = () => {
  const value = admin.token();
  byId("token").classList.remove("wanted");
  if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
};
byId("token").onkeydown = (e) => {
  if (e.key !== "Enter") return;
  if (admin.pendingID) admin.open(admin.pendingID); else admin.find(true);
};
byId("openPending").onclick = () => { if (admin.pendingID) admin.open(admin.pendingID); };
byId("copyLink").onclick = () => admin.copyLink();
byId("shareLink").onfocus = () => byId("shareLink").select();
byId("exportJson").onclick = () => admin.exportJSON();
byId("exportCsv").onclick = () => admin.exportCSV();
byId("zoomReset").onclick = () => admin.zoom(0, 0);
byId("zoomProblem").onclick = () => admin.zoomToProblem();
byId("cutGaps").onchange = () => { if (admin.model) admin.renderWaterfall(); };
for (const box of document.querySelectorAll("#legend input[data-filter]")) {
  box.onchange = () => {
    if (box.checked) admin.hidden.delete(box.dataset.filter); else admin.hidden.add(box.dataset.filter);
    if (admin.model) admin.renderWaterfall();
  };
}
let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (admin.model) admin.renderWaterfall(); }, 150);
});
window.addEventListener("hashchange", () => admin.fromHash());

const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) byId("token").value = saved;
admin.fromHash();
window.kassaAdmin = admin;
