// The player's token and line ticket: read from the URL once, then kept in
// sessionStorage (this tab only) and removed from the address bar, so a
// reload still works and the token is not left in a URL to be shared.

const TOKEN = "levee.token";
const TICKET = "levee.ticket";

const memory = new Map(); // for when storage is disabled: works until the tab closes

function load(key) {
  try {
    const v = sessionStorage.getItem(key);
    if (v !== null) return JSON.parse(v);
  } catch { /* disabled or garbled: use the memory copy */ }
  return memory.get(key) ?? null;
}

function save(key, value) {
  if (value == null) memory.delete(key);
  else memory.set(key, value);
  try {
    if (value == null) sessionStorage.removeItem(key);
    else sessionStorage.setItem(key, JSON.stringify(value));
  } catch { /* disabled: the memory copy serves */ }
}

// fromURL takes token and ticket from the query string into storage.
export function fromURL() {
  const q = new URLSearchParams(location.search);
  const token = q.get("token"), ticket = q.get("ticket");
  if (token && token !== load(TOKEN)) {
    save(TOKEN, token);
    save(TICKET, null); // another player's ticket, or a stale one
  }
  if (ticket) save(TICKET, { ticket, graceMs: 0, droppedAt: 0 });
  if (token || ticket) history.replaceState(null, "", location.pathname);
}

export function token() {
  return load(TOKEN);
}

// ticket is the stored ticket while it can still keep a place: its grace
// period runs from the moment the connection dropped.
export function ticket() {
  const t = load(TICKET);
  if (!t) return null;
  if (t.droppedAt && t.graceMs && Date.now() - t.droppedAt > t.graceMs) {
    save(TICKET, null);
    return null;
  }
  return t.ticket;
}

export function keepTicket(ticket, graceMs) {
  save(TICKET, { ticket, graceMs, droppedAt: 0 });
}

// dropped notes when the connection was lost (the grace period starts).
export function dropped() {
  const t = load(TICKET);
  if (t && !t.droppedAt) save(TICKET, { ...t, droppedAt: Date.now() });
}

// forgetTicket is called once admitted: the ticket has been used.
export function forgetTicket() {
  save(TICKET, null);
}
