// The waiting page: connects to the gate over the JSON subprotocol, shows
// the line's pushes, and reconnects (keeping the ticket) when the
// connection drops. protojson sends 64-bit numbers as strings and leaves
// out zero values, hence the Number(... ?? 0) everywhere.
//
// The gate pushes a status when something changes and otherwise seldom
// (every 2 s near the front, up to every 60 s far back; there is no
// "stale" timeout here: a quiet connection is a line that is not moving,
// and a dead one closes). Between pushes the page counts the last one down
// at the release rate (estimate.js). The ticket comes in the connection's
// first status only (a status without one means unchanged): the page
// keeps the last one it got (session.js).
import { estimate } from "./estimate.js";
import { closeMeaning, errorText } from "./format.js";
import * as session from "./session.js";
import * as view from "./view.js";

const SUBPROTOCOL = "levee.v2.json";
const SPREAD_MS = 5000; // the first reconnect waits a random 0-5 s...
const BASE_MS = 100; // ...later ones full jitter over min(100 ms · 2^(n-1), 5 s),
const CAP_MS = 5000; // as the Go SDK's backoff.Reconnect does.

const ESTIMATE_EVERY_MS = 1000; // how often the count-down between pushes is redrawn

const line = { first: 0, seen: [] }; // first position pushed; distinct positions pushed, in order
let last = null; // the last push ({q, at}: the status and when it came), while waiting
let ticker = 0; // the count-down's interval, while waiting
let attempt = 0; // reconnects since the last frame from the gate
let lastError = null; // the last error frame's text and retry_after
let admitted = false;

function reconnectDelay(n, after) {
  const spread = n === 0 ? SPREAD_MS : Math.min(BASE_MS * 2 ** (n - 1), CAP_MS);
  return after + Math.random() * spread;
}

function wsURL() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const q = new URLSearchParams({ token: session.token() });
  const ticket = admitted ? null : session.ticket();
  if (ticket) q.set("ticket", ticket);
  return `${scheme}//${location.host}/ws?${q}`;
}

function onQueue(raw) {
  const q = {
    position: Number(raw.position ?? 0),
    etaMs: Number(raw.etaMs ?? 0),
    releaseRate: Number(raw.releaseRate ?? 0),
    lineLength: Number(raw.lineLength ?? 0),
    mode: raw.mode ?? "",
  };
  admitted = false; // a reconnect after admission can be put back in line
  if (raw.ticket) session.keepTicket(raw.ticket, Number(raw.graceMs ?? 0));
  if (q.position > line.first) line.first = q.position; // a new line (or the first push)
  if (line.seen.at(-1) !== q.position) line.seen = [...line.seen, q.position].slice(-100);
  last = { q, at: performance.now() };
  if (!ticker) ticker = setInterval(showEstimate, ESTIMATE_EVERY_MS);
  showEstimate();
}

// showEstimate shows the last push counted down to now.
function showEstimate() {
  if (!last) return;
  const e = estimate(last.q, performance.now() - last.at);
  const progress = Math.round((100 * (line.first - e.position)) / line.first) || 0;
  view.waiting({ ...last.q, position: e.position, etaMs: e.etaMs }, progress, line.seen);
}

// stopEstimate ends the count-down: the player is in, or the connection
// ended (the next connection's first push starts it again).
function stopEstimate() {
  clearInterval(ticker);
  ticker = 0;
  last = null;
}

function onAdmitted(a) {
  stopEstimate();
  admitted = true;
  session.forgetTicket();
  view.admitted(Number(a?.waitedMs ?? 0));
}

function onFrame(ev) {
  let f;
  try { f = JSON.parse(ev.data); } catch { return; }
  attempt = 0;
  if (f.queue) onQueue(f.queue);
  else if (f.admitted) onAdmitted(f.admitted);
  else if (f.welcome) {
    if (!admitted) onAdmitted(null);
    view.welcome(f.welcome);
  } else if (f.error) {
    lastError = { text: errorText(f.error), retryAfterMs: Number(f.error.retryAfterMs ?? 0) };
    view.problem(lastError.text);
  }
}

// retryIn shows "Trying again in N s" until ms have passed, then connects.
function retryIn(ms, why) {
  view.problem(`${why}\nTrying again in ${Math.ceil(ms / 1000)} s…`, admitted ? "admitted" : "retrying");
  const until = Date.now() + ms;
  const tick = setInterval(() => {
    const left = until - Date.now();
    if (left <= 0) {
      clearInterval(tick);
      connect(true);
      return;
    }
    view.problem(`${why}\nTrying again in ${Math.ceil(left / 1000)} s…`);
  }, 250);
}

function onClose(ev) {
  stopEstimate();
  const meaning = closeMeaning(ev.code);
  const text = lastError ? `${meaning.text}\n${lastError.text}` : meaning.text;
  const after = meaning.retry === "after" ? (lastError?.retryAfterMs ?? 0) : 0;
  lastError = null;
  if (meaning.retry === "no") {
    view.problem(text, admitted && ev.code !== 1008 ? "admitted" : "error");
    return;
  }
  session.dropped();
  retryIn(reconnectDelay(attempt++, after), text);
}

function connect(again) {
  view.connecting(again);
  let ws;
  try {
    ws = new WebSocket(wsURL(), SUBPROTOCOL);
  } catch {
    onClose({ code: 1006 });
    return;
  }
  ws.addEventListener("message", onFrame);
  ws.addEventListener("close", onClose);
}

session.fromURL();
if (session.token()) connect(false);
else view.problem("This link has no player token. Open the waiting page from the game.", "error");
