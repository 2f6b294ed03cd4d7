// What the page shows between the gate's pushes. Pure functions, no DOM.
//
// The gate pushes a waiting player's status only when something they would
// notice changed (the place moved by 10 %, the ETA by 10 % and 1 s, the
// mode or the rate) and otherwise at a heartbeat that is 2 s near the
// front and up to 60 s far back. So that the page still shows a live
// place, it counts the last push down between pushes:
//
//   - the place falls at RATE_SHARE (90 %) of the release rate shown, a
//     little slower than the line moves, so the page lags behind the line
//     rather than runs ahead of it;
//   - never below 1, and never by a whole "moved" step of the gate (10 %
//     of the pushed place, at least 1): had the place fallen that far, the
//     gate would have pushed it, so the page is less than one step off
//     the line: a push may set the shown place back up, by less than a
//     step (near the front the step is 1 and the page shows the pushed
//     place as it is: pushes come every 2 s there);
//   - the ETA falls at the same pace (0.9 s a second), likewise never by a
//     whole step of the gate (10 %, at least 1 s) and never below 1 s
//     while it is known;
//   - a paused line (rate 0) does not count down.
//
// Each push replaces the estimate. Keep MOVE_SHARE and the ETA step in step
// with gate/pushrule.go (moveShare, etaShare, minETAChange).

export const RATE_SHARE = 0.9;
const MOVE_SHARE = 10;
const ETA_SHARE = 10;
const MIN_ETA_STEP_MS = 1000;

// estimate is the place and ETA to show elapsedMs after the push q
// ({position, etaMs, releaseRate}, numbers; etaMs 0 when unknown).
export function estimate(q, elapsedMs) {
  const position = q.position, etaMs = q.etaMs;
  if (!(q.releaseRate > 0) || !(elapsedMs > 0) || !(position > 0)) return { position, etaMs };
  const moveStep = Math.max(1, Math.floor(position / MOVE_SHARE));
  const counted = Math.floor((q.releaseRate * RATE_SHARE * elapsedMs) / 1000);
  const shownPosition = Math.max(1, position - moveStep + 1, position - counted);
  if (!(etaMs > 0)) return { position: shownPosition, etaMs: 0 };
  const etaStep = Math.max(MIN_ETA_STEP_MS, Math.floor(etaMs / ETA_SHARE));
  const shownEta = Math.max(MIN_ETA_STEP_MS, etaMs - etaStep + 1, etaMs - Math.floor(RATE_SHARE * elapsedMs));
  return { position: shownPosition, etaMs: Math.min(etaMs, shownEta) };
}
