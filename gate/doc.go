// Package gate is Levee's edge tier: it holds the players' WebSocket
// connections, authenticates them with signed tokens, and routes each
// player's requests to the logic instance that owns the player's shard.
//
// The gate knows no game of its own: it serves the declaration in
// Config.Game (package game), refusing at New one that cannot work. A frame
// names one of the game's actions and carries its request (levee.v2.proto:
// protobuf bytes; levee.v2.json: the request message's protojson object,
// converted by package wire with the declaration's types). The gate checks
// that the request decodes as the action's request message (BAD_REQUEST
// otherwise, UNKNOWN_MESSAGE for an action the game does not declare, both
// with the frame's request id), caps it at the action's MaxRequestBytes
// (the frame at -max-frame), and sends logic a Call{action, request bytes};
// a reply's bytes, replayed mark and state version go back in the
// ServerFrame (on JSON the reply as the reply message's object). An action
// declared with game.ReadsPlayer goes to the shard of the player its
// target function names (logic calls the same function there to read that
// player); every other request goes to the sender's shard. The sender's id
// in LogicRequest.player_id is always the token's.
//
// Every request frame gets exactly one reply frame with the same request id:
// the logic tier's result or a typed error. The gate never retries a
// request logic may have executed.
//
// Where a shard is served (logic.go): with logic on bbolt, shard s is
// served by -logic-addrs[s mod N], always. With logic on PostgreSQL
// (-store=postgres) shards move between logic processes by their leases,
// and the -logic-addrs are only entry points (one Kubernetes Service will
// do). A logic process asked for a shard it does not hold answers
// FAILED_PRECONDITION with the owner's address (apperr.NotOwner, a
// leveev2.ShardOwner detail; the request was not executed): the gate sends
// the same request to the owner, within the same budget, and caches the
// owner for the shard's next requests (gate_logic_redirects_total,
// gate_logic_owner_cache_size). After 3 hops it answers BUSY with
// retry_after 1 s. A cached owner whose connection is failing, or that
// answers UNAVAILABLE (down, stopping, or apperr.NoOwner: the shard has no
// owner during a move, which the player gets as UNAVAILABLE with logic's
// retry_after) or lets a request's budget run out (DEADLINE_EXCEEDED: a
// frozen process), is forgotten, and the shard's next request goes to its
// entry point again. Owner connections are dialed on first use, at most
// 64 (the least recently used closed past that), and closed at shutdown.
//
// Per-connection cost is kept small: the HTTP handler returns right after the
// upgrade, so a connection holds one reader goroutine, a 1 KiB read buffer and
// no write buffer between writes (a shared pool). One server-owned goroutine
// pings the connections, a slot of them at a time, and drops the ones that
// have sent nothing for -ping-interval + -pong-timeout after a ping, with
// the gate's own lateness excused (keepalive.go); writes are serialized by
// a per-connection mutex.
//
// A connection's start, in order (handler.go, conn.go, waiting.go): the
// limits per source address (limits.go: handshake rate and open
// connections per /24 or /64, X-Forwarded-For only from -trusted-proxies)
// refuse before anything else is looked at; the
// handshake cap gives the upgrade request a handshake (handshake.go), a
// value with one owner at a time that ends with an idempotent End; the
// connection cap, the token and the line's precheck may refuse before the
// upgrade; then enterLine puts the tracked connection in the line and
// hands the handshake to one of three starts: waiting (ended with the
// first QueueStatus), refused (ended before the refusal), or logged in.
// There is one login flow (conn.login) for players let in at once and
// those released from the line (a new handshake for the walker's
// release): Admitted if any, the logic call (the handshake ends with its
// answer), then the welcome, or the typed error and a close.
//
// Overload protection (level 1 of Levee's three), each mechanism with its
// own switch and all of them under Config.Protection:
//
//   - Connection cap (MaxConns): past it a player is upgraded and answered
//     from the HTTP handler itself with a pre-encoded SERVER_FULL frame
//     (retry_after jittered ±20 %, a friendly message and the optional
//     "while you wait" card) and a 1013 close, in one write, then the socket
//     is closed; nothing is kept and gate_active_connections does not move.
//   - Handshake cap (MaxHandshakes): while that many connections are
//     starting, HTTP 503 with Retry-After before any upgrade.
//   - Per-connection rate limit: a token bucket (ConnRate, ConnBurst) on the
//     frames a player sends; over it, RATE_LIMITED with the time until a
//     token as retry_after.
//   - Per-connection in-flight limit (MaxInFlight): RATE_LIMITED with a
//     short retry_after.
//   - Per-player rate limit (PlayerRate, PlayerBurst): a token bucket per
//     player id across its connections, kept until it is full again;
//     RATE_LIMITED with the time until a token.
//   - Per-address limits (AddrHandshakeRate, AddrHandshakeBurst,
//     AddrMaxConns, AddrLimitExempt, TrustedProxies): RATE_LIMITED or
//     SERVER_FULL frames with retry_after and 1013, before the token check.
//
// One player, one place (replace.go): a gate holds one connection per
// player id. A newer one takes the older one's place (its ticket in line,
// or in at once if it was let in) and the older one is closed with 4001
// once its requests in flight are answered.
//   - Logic's pushback (LogicPushback): after logic refuses a request for
//     shard s with RESOURCE_EXHAUSTED and a pushback P, the shard is cooling
//     for that criticality and the lower ones for P (at most 2 s): such
//     requests get BUSY from the gate at once (retry_after = the cooling
//     left plus up to 25 % jitter, backpressure = the hints logic last sent
//     for the shard), without a gRPC call. Critical requests always go to
//     logic. A refused job action (one that runs a compute job) cools the
//     shard's job actions only, as logic may refuse them for the job
//     tier's sake.
//
// When logic refuses, the player gets logic's exact code (BUSY, SERVER_FULL,
// RATE_LIMITED, …, decoded from the status details by apperr.FromStatus)
// with logic's retry delay as retry_after and its queue depth and fill ratio
// (the leveev2.Backpressure in the details) as the frame's backpressure.
// The gate retries no refusal (only a redirect, above, which is none).
//
// # Criticality
//
// A request's class (levee/internal/priority) is the cluster's decision:
// the class the game declares for the action (game.Critical, Default or
// Sheddable; logins are critical). A frame's criticality may lower its
// request's class but never raise it: a higher one is ignored, the request
// is served with the declared class, and
// gate_criticality_upgrades_refused_total{action} counts it; UNSPECIFIED
// means the declared class. Every action label is a declared action's name
// (plus login, and invalid for a frame refused before its action was
// known). The class decides the
// gate's own refusals (the cooling above; gate_request_rejections_total
// {reason,criticality}) and goes to logic in the levee-criticality gRPC
// metadata, which logic and battle trust. A reconnect to a match in
// progress gets ahead through its ticket's priority lane (below).
//
// # The admission line
//
// Every player with a valid token goes through one line per gate (package
// queue; -line-mode, -line-rate, -line-interval, -line-max, -line-grace,
// -line-push, -line-retry-after). Modes: open (the default: with nobody
// waiting a player is let in at once and nothing changes for clients that
// know nothing of the line), queueing (accept and hold; nobody is let in and
// nothing reaches logic), paced (-line-rate per -line-interval, smoothly:
// one every interval/rate), closed (maintenance) and auto (paced, with the
// rate set by the auto pacer, below). A player joins the line when the mode
// is not open or when anyone is waiting already (in open mode the line
// empties as fast as the gate's room allows).
//
// What a player sees (every push has request_id 0):
//
//	connect /ws?token=T[&ticket=K]
//	  -> welcome                                 let in at once (open, empty line)
//	  -> queue{position, eta_ms, release_rate,   in line: at once (with the ticket), then
//	           line_length, ticket, grace_ms,    when something the player would notice
//	           mode}                             changes, or at a heartbeat (push rule)
//	     ... requests -> error NOT_ADMITTED, retry_after = the ETA (100 ms..1 min;
//	                     1 min when there is no ETA, 200 ms once released)
//	  -> admitted{waited_ms, ticket} -> welcome  released, with an admission pass;
//	                                             requests are served from the welcome on
//	  -> error + close                           refused: see below
//
// The ETA is the queue's (position / measured release rate; 0 when
// unknown, i.e. queueing or closed); release_rate is the measured rate (the
// configured one until measured, 0 when the line does not move); mode is
// the queue's mode ("paced" in auto mode). The ticket comes in the first
// status of a connection only (signed once); a later status leaves it
// empty, which means unchanged.
//
// The push rule (pushrule.go): every -line-push the walker looks at every
// waiting player and writes a status only to those for whom something
// changed since the last one they were sent: the line's mode or release
// rate (by 10 %; an operator's change is walked at once, so it reaches
// everyone at once), their position (by 10 % of it, at least one place),
// their ETA (by 10 % and at least 1 s), or their heartbeat is due: every
// -line-push within the first 100 places, then growing with the position
// to 30 × -line-push (60 s) from place 3,000 on (lineapi.MaxStatusInterval
// bounds the gap). Far back in a paced line a player is pushed about ten times on
// the way to the front; near the front, at every walk. Clients may count
// position and ETA down at release_rate between pushes (the waiting page
// does). If logic refuses the login of a
// released player, the player gets Admitted, the typed error and the close
// code of a refused login (1013 for BUSY), and may come back with the
// ticket (priority lane, below).
//
// Refusals, each an error frame then a close, counted by
// gate_line_refusals_total{reason}, and none of them changes the line:
//
//   - closed: UNAVAILABLE (the tier is down for maintenance, come back
//     later) with the operator's retry_after (-line-retry-after or POST
//     retry_after, not jittered: it is a time the operator announces) and a
//     message saying so, then 1013. UNAVAILABLE rather than SERVER_FULL,
//     because it is not about load: clients should not retry sooner. A
//     player who was in line before the closing (away, with a ticket) may
//     still come back to their place; the line is frozen.
//   - full (-line-max): SERVER_FULL, retry_after = the rate's interval
//     (at least 1 s) ±20 %, 1013.
//   - bad_ticket: a ticket that is malformed, forged (HMAC mismatch, checked
//     in constant time), signed with another secret or expired is
//     UNAUTHORIZED; a ticket given to another player is FORBIDDEN; 1008.
//   - ticket_in_use: the ticket's place is held by a connection that is
//     still open: TICKET_IN_USE (apperr.ErrTicketInUse), 1008. The old
//     connection must close first (a dead one is dropped after
//     -ping-interval + -pong-timeout).
//
// Tickets (ticket.go): "t2.<line id>.<ticket id>.<player>.<joined
// ms>.<expiry>.<mac>", an HMAC-SHA256 with the gate's token secret over the
// rest; valid 24 h (the line decides how long a place is kept). joined is
// when the player first joined a line, kept through every rejoin. The line
// id is drawn at random when the gate starts, so a ticket of another gate
// or of an earlier run of this one is recognised as such: a ticket of
// another line. Old "t1" tickets (no join time) still verify; one of
// another line is ignored (the back of the line, a new t2 ticket).
//
// A gate that restarts gives its players their places back. For
// -line-grace after it starts (the return window: the grace any away
// player has, counted from the moment the line was lost), a verified,
// unexpired ticket of another line is put back by its signed join time
// (queue.Rejoin, same ticket id): behind the returning players who joined
// before, and ahead of everyone who joined later, arrivals after the
// restart included (who move back a place for each). The player gets a
// ticket of the new line with the same id and join time; presenting the
// old one again is that place's ticket (ticket_in_use while connected,
// Resume once away). Forged, expired, other-player and in-use tickets are
// refused as below. After the window, a ticket of another line that this
// line has not taken back joins the back. Join times are the gates' wall
// clocks: gates of one deployment need synchronised clocks for the order
// to hold across them.
//
// Admission passes (pass.go): the Admitted frame carries a pass,
// "a1.<line id>.<ticket id>.<player>.<admitted ms>.<expiry>.<mac>", signed
// and verified as a ticket (and refused for the same reasons: malformed,
// forged, expired, another player's), valid 24 h; the SDK keeps it as the
// player's ticket once they are in. It tells a line that the player was
// playing, not waiting: a restarted gate (or another gate of the
// deployment) lets a verified pass in at once during its return window,
// without waiting for the pace (the line paces arrivals, not players
// resuming; the connection cap is checked before the line, as for every
// connection), so that players who were in do not take places in the line
// ahead of those still waiting, who get exactly their places back. While
// the line is queueing the pass goes to the priority lane instead; while
// it is closed it is refused as anyone is. Each pass is honoured once per
// gate run: the line remembers the ones it took in its window (at most
// 2^18, each until its expiry, all forgotten when the window ends), and one
// shown again joins the back, so a pass cannot be shared or replayed to
// skip the line. The player gets a pass of the new line with the same
// ticket id. After the window a pass of another line joins the back; the
// gate that issued it puts it in the priority lane within -line-grace of
// the admission (as the ticket below), and at the back after. A pass only
// proves that the player was let in at that time, not that they were still
// playing when the gate stopped. A client that shows the last QueueStatus
// ticket instead (older SDKs) comes back by its join time, near the front,
// as the priority lane would have put it. Passes are counted by
// gate_line_passes_total{result}.
//
// Reconnecting with ?ticket= (same player token):
//
//   - within -line-grace of dropping: the same place, the same ticket;
//   - the ticket's turn came while the player was away: let in at once
//     (admitted, then welcome); the turn used its slot of the pace;
//   - the grace is over, or the ticket is unknown: the back of the line,
//     with a new ticket; a client sees it from the ticket in the first
//     QueueStatus differing from the one it sent (the protocol has no
//     message field there, and an error push before the QueueStatus would
//     read as a refusal to existing clients);
//   - the ticket was let in within -line-grace (the player dropped right
//     after being let in, e.g. in the middle of a match), or its admission
//     pass is shown: the priority lane, which the line empties before
//     anyone else, or at once if the gate is open with nobody waiting.
//     Each such ticket or pass is good for one reconnect; the new ticket
//     the player gets in line is good for the next. Players let in at once
//     (open mode, never waited) have no ticket, no pass and no priority;
//   - a pass of another line, in this line's return window: let in at once
//     (admitted with waited_ms 0 and a new pass, then welcome), once.
//
// # Cost of a waiting player
//
// A waiting connection costs what an idle one does: its reader goroutine
// (which answers NOT_ADMITTED), its 1 KiB read buffer, no write buffer
// between writes, and about 200 bytes of line state (its ticket string and
// its slot in the queue). One server-owned walker goroutine (line.go)
// releases players every 100 ms (queue.AppendRelease, limited by the gate's
// room: the free handshakes and connection slots, for the caps that are on)
// and every -line-push walks the line once (queue.AppendPositions) and
// writes the waiters the push rule picks one QueueStatus each through their
// write path, with a write deadline of at most 500 ms; the part of a status
// that is the same for everyone is encoded once per walk and codec
// (wire.StatusTemplate), so a push costs its write and no allocation of
// its own, and a waiter with nothing to push costs a look at 12 bytes
// (conn.pushed). A waiter whose connection is being written to (a reply,
// say) is skipped for that round (and looked at again at the next), and
// one whose write fails is closed (it keeps its place for the grace
// period). A released player's
// Admitted push and login run in a goroutine of their own, like a request;
// the walker releases no more players than there is room for, so the
// handshake cap bounds those goroutines. A waiting player does not count
// against the handshake cap (so the line can be far longer than
// -max-handshakes) but does hold a connection slot (-max-conns).
//
// # Admin API
//
// On the ops listener, with -admin-token (or GATE_ADMIN_TOKEN): GET
// /admin/line gives the line as JSON (mode, rate{n, interval, per_second},
// length, waiting, away, held, priority, admitted_total, dropped_total,
// measured_rate, oldest_wait_ms, room, auto{...}); POST /admin/line (form or
// JSON object) sets any of mode, rate, interval, max_length, retry_after,
// auto_min_rate, auto_max_rate at once. Without the token the API answers
// 404; a missing or wrong bearer token 401 (compared in constant time); an
// invalid value (zero, negative, absurd, unknown mode or field) 400 naming
// it, and nothing is applied: a POST is validated whole first. Every change
// is logged with its old and new values and the caller's address, and
// pushed to the waiting players at once. The seed's launch:
//
//	A='Authorization: Bearer '$GATE_ADMIN_TOKEN; L=http://gate:8082/admin/line
//	curl -H "$A" -d mode=queueing $L                            # T-5 min: accept, forward nothing
//	curl -H "$A" -d mode=paced -d rate=1000 -d interval=10s $L  # T-0: 1,000 every 10 s
//	curl -H "$A" $L                                             # T+5: read length, oldest_wait_ms, ...
//	curl -H "$A" -d rate=2000 $L                                # ... and speed up if logic keeps up
//	curl -H "$A" -d mode=open $L                                # T+15: the line is done
//	curl -H "$A" -d mode=closed -d retry_after=30m $L           # maintenance
//	curl -H "$A" -d mode=auto -d auto_min_rate=50 -d auto_max_rate=500 $L
//
// # Auto mode
//
// Package autopace holds auto mode; its loop runs for the life of Run and
// the line applies what it decides (lineauto.go). Every -auto-interval
// (5 s) it reads the tiers' health (autopace.Scraper, autopace.Pressure):
// the sum of logic_queue_depth over the -auto-metrics-urls pages, the
// battle p99 over the last interval (from the change in the
// battle_latency_seconds buckets, the maximum over instances), and the
// backpressure ratio on logic's replies to this gate (the interval's mean,
// in an EWMA). The decision (autopace.Pace, pure and unit-tested): any known
// signal at or over its threshold (-auto-max-queue-depth 500,
// -auto-battle-p99 500 ms; backpressure above -auto-max-backpressure 0.5)
// multiplies the rate by -auto-down (0.5); all known signals healthy
// multiply it by -auto-up (1.25), except the first healthy interval after
// a fall, which holds (the signals lag the rate by an interval); no known
// signal (pages unreadable, no battles, no replies) holds. The rate stays
// within -auto-min-rate..-auto-max-rate (per second; POST auto_min_rate,
// auto_max_rate). An unreadable page is left out, logged, and shown in GET
// /admin/line (scrape_errors). Every change is logged with its reason.
//
// # Several gates
//
// Each gate runs its own line; nothing is shared but the token secret. A
// global release rate R is split evenly: with N gate replicas, give each
// rate R/N (POST to every replica; the load balancer should spread players
// evenly, or the longer lines wait longer). In auto mode each gate adapts on
// its own from the same tier signals (plus its own replies' backpressure),
// so they move together, but the bounds are per gate: set them to the
// global bounds / N.
//
// When a reconnecting player is routed to another gate, their ticket
// verifies (same secret) but names another gate's line: while that gate is
// in its return window (it has just started, e.g. in a rolling restart)
// the player takes a place by their join time, which is fair across the
// gates (one order by join time), or, with an admission pass, is let in at
// once; later the player joins the back of the new gate's line with a new
// ticket and loses their place and the priority lane. The old gate keeps the place for the grace period; if its turn
// comes meanwhile it uses a slot of that gate's pace for nobody. Routing
// that sends a player back to the same gate (session affinity on the
// client address, or a hash of the player id in the load balancer) keeps
// places across reconnects; there is no hand-over of a running line
// between gates.
//
// # Stopping
//
// On SIGTERM (internal/serve) the line stops moving, the listener stops,
// in-flight requests finish, and every player socket, waiting ones
// included, is closed with 1012 (Service Restart); the SDK
// (client.Reconnect, backoff.DefaultReconnect) and the waiting page spread
// their first redial uniformly over [0, 5 s) and present their tickets:
// the players who were waiting their line ticket, and get their places
// back by their join time; the players who were in their admission pass
// (Client.Ticket), and are let in at once, without passing through the
// restarted gate's line. The waiting page ignores the pass: a player it let
// in comes back as a new arrival.
//
// # Metrics
//
// gate_connections_peak (the most connection slots held at once since the
// gate started: upgrading, waiting and logged in; the connection cap is on
// slots, so it never passes gate_connection_cap, which is -max-conns with
// -conn-cap on and 0 with it off), gate_line_length (in line, away ones included), gate_line_waiting,
// gate_line_admitted_total, gate_line_release_rate (configured, per
// second), gate_line_measured_rate, gate_line_wait_seconds (join to
// admission, for players who waited; up to 30 min),
// gate_line_refusals_total{reason}, gate_line_passes_total{result}
// (admission passes shown: admitted, priority, replayed, expired,
// foreign_late, full; the last four join the back), gate_line_mode{mode} (1
// for the current one), gate_line_pushes_total{result}, gate_line_push_reasons_total{reason}
// (first, mode_rate, moved, eta, heartbeat: why the sent ones went),
// gate_line_auto_changes_total{direction},
// gate_line_auto_steps_total{verdict}.
package gate
