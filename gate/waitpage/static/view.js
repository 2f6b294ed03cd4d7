// Puts the page's state on screen and into <main>'s data attributes.
import { count, duration, modeSentence, rate } from "./format.js";

const $ = (id) => document.getElementById(id);
const main = $("app");

function show(id, text) {
  const el = $(id);
  el.textContent = text ?? "";
  el.hidden = !text;
}

// setState is one of connecting, waiting, retrying, admitted, error.
export function setState(state) {
  main.dataset.state = state;
}

function setProgress(percent) {
  const p = $("progress");
  p.value = percent;
  p.textContent = `${percent}%`;
}

// waiting shows a QueueStatus (the last push, counted down to now).
// progress is 0..100; seen the positions pushed so far.
export function waiting(q, progress, seen) {
  setState("waiting");
  main.dataset.position = String(q.position);
  main.dataset.positionsSeen = seen.join(",");
  $("title").textContent = "You are in line";
  const pos = $("position");
  pos.hidden = false;
  pos.replaceChildren(
    "You are number ",
    Object.assign(document.createElement("strong"), { textContent: count(q.position) }),
    " in line",
  );
  setProgress(progress);
  $("eta").textContent = duration(q.etaMs) ?? "working it out…";
  $("rate").textContent = rate(q.releaseRate);
  $("length").textContent = q.lineLength ? count(q.lineLength) : "–";
  show("mode", modeSentence(q.mode));
  show("status", "");
  $("facts").hidden = $("hint").hidden = false;
  $("player").hidden = true;
}

// admitted shows that the wait is over; waitedMs may be 0.
export function admitted(waitedMs) {
  setState("admitted");
  main.dataset.position = "0";
  $("title").textContent = "You're in!";
  const waited = duration(waitedMs);
  $("position").textContent = waited ? `Your wait is over: you waited ${waited.replace("about ", "")}.` : "Your wait is over.";
  setProgress(100);
  show("mode", "");
  show("status", "");
  $("facts").hidden = true;
  $("hint").hidden = true;
}

// welcome shows the player the game greeted (a levee.v2.json Welcome: the
// game's own state is in w.state, which the page, knowing no game, leaves
// to the game's client).
export function welcome(w) {
  $("player-id").textContent = w?.playerId ?? "";
  $("player").hidden = false;
}

// problem shows a message; state "error" when it is final, "retrying" when
// the page will try again, or the current state to keep it.
export function problem(text, state) {
  if (state) setState(state);
  if (state === "error") {
    $("title").textContent = "You could not join the line";
    show("position", "");
  } else if (state === "retrying" && !main.dataset.position) {
    $("title").textContent = "The line is busy";
    show("position", "");
  }
  show("status", text);
}

// connecting is shown while a (re)connection is being opened.
export function connecting(again) {
  if (main.dataset.state !== "admitted") setState("connecting");
  if (again) show("status", "Reconnecting…");
}
