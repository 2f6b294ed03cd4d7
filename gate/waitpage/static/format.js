// Words for the numbers the gate sends. Pure functions, no DOM.

const numbers = new Intl.NumberFormat("en");

// count formats 1234 as "1,234".
export function count(n) {
  return numbers.format(n);
}

// duration formats milliseconds as "less than a minute", "about 2 min" or
// "about 1 h 20 min"; null when unknown (0 or not a number).
export function duration(ms) {
  if (!(ms > 0)) return null;
  if (ms < 60_000) return "less than a minute";
  const min = Math.round(ms / 60_000);
  if (min < 60) return `about ${min} min`;
  const h = Math.floor(min / 60), rest = min % 60;
  return rest ? `about ${h} h ${rest} min` : `about ${h} h`;
}

// rate formats a release rate in players per second.
export function rate(perSecond) {
  if (!(perSecond > 0)) return "paused";
  if (perSecond >= 1) return `${count(Math.round(perSecond))} a second`;
  const perMinute = perSecond * 60;
  if (perMinute >= 1) return `${count(Math.round(perMinute))} a minute`;
  return `${count(Math.max(1, Math.round(perMinute * 60)))} an hour`;
}

// modeSentence explains the line's mode to a player; "" for no sentence.
export function modeSentence(mode) {
  switch (mode) {
    case "queueing":
      return "The doors are not open yet. You are holding your place, and the line starts moving at launch.";
    case "paced":
    case "auto":
      return "The line is moving. We let players in a few at a time so the game stays fast for everyone.";
    case "closed":
      return "The game is closed for maintenance right now. Stay on this page to keep your place.";
    default:
      return "";
  }
}

// closeMeaning says what a WebSocket close code means for the player and
// whether to retry: "no", "backoff" (unexpected; spread and back off) or
// "after" (wait the server's retry_after first).
export function closeMeaning(code) {
  switch (code) {
    case 1000:
      return { text: "The server ended the session.", retry: "no" };
    case 1008:
      return { text: "Your sign-in link is not valid or has expired. Open the waiting page again from the game.", retry: "no" };
    case 1012:
      return { text: "The server is restarting.", retry: "backoff" };
    case 1013:
      return { text: "The server is busy right now.", retry: "after" };
    case 1001:
      return { text: "The server is going away.", retry: "backoff" };
    case 1011:
      return { text: "The server hit an error.", retry: "backoff" };
    default:
      return { text: "The connection was lost.", retry: "backoff" };
  }
}

// errorText is the message of an Error frame, or a sentence for its code.
export function errorText(err) {
  if (err.message) return err.message[0].toUpperCase() + err.message.slice(1);
  switch (err.code) {
    case "ERROR_CODE_UNAUTHORIZED": return "Your sign-in link is not valid or has expired.";
    case "ERROR_CODE_SERVER_FULL": return "The server is full right now.";
    case "ERROR_CODE_BUSY": return "The server is busy right now.";
    case "ERROR_CODE_SHUTTING_DOWN": return "The server is restarting.";
    default: return "Something went wrong.";
  }
}
