package gate

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Refusing a connection after the upgrade happens in the HTTP handler
// itself: hijack, write the 101 Switching Protocols response, one typed
// error frame and a close frame in a single write, close the TCP
// connection, return. No goroutine, no buffer and no tracking outlive the
// handler, and the gate does not wait for the player's close frame.
//
// The gate answers the handshake itself here instead of calling gorilla's
// Upgrade, because Upgrade writes the 101 on its own: one more write system
// call, which measured as nearly half of the handler's time on a loopback
// socket. Gorilla's Upgrade still answers any request that is not a
// well-formed WebSocket handshake, with the HTTP error it would give.
//
// If the player pipelined data after its handshake, closing with it unread
// may make the kernel send a reset instead of a FIN; a player that waits for
// the server's first frame, as the protocol says, always reads both frames.

// refuseUpgraded upgrades r and answers with the bytes frames returns for
// the negotiated subprotocol: complete WebSocket frames, written as they are.
func (s *Server) refuseUpgraded(w http.ResponseWriter, r *http.Request, frames func(wire.Codec) []byte) {
	var accept [28]byte
	h, ok := w.(http.Hijacker)
	if !ok || !acceptKey(r, &accept) {
		s.refuseViaGorilla(w, r, frames)
		return
	}
	subprotocol := selectSubprotocol(r)
	codec, _ := wire.ForSubprotocol(subprotocol)
	nc, brw, err := h.Hijack()
	if err != nil {
		s.log.Debug("hijacking a refused connection", "err", err, "remote", r.RemoteAddr)
		return
	}
	defer nc.Close()
	if brw.Reader.Buffered() > 0 {
		return // data before the handshake finished, as gorilla refuses too
	}
	_ = nc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	// net/http's buffer for this connection: the response is built in it
	// and goes out with the frames in one write.
	bw := brw.Writer
	b := bw.AvailableBuffer()
	b = append(b, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	b = append(b, accept[:]...)
	if subprotocol != "" {
		b = append(b, "\r\nSec-WebSocket-Protocol: "...)
		b = append(b, subprotocol...)
	}
	b = append(b, "\r\n\r\n"...)
	_, _ = bw.Write(b)
	_, _ = bw.Write(frames(codec))
	_ = bw.Flush()
}

// refuseViaGorilla lets gorilla's Upgrade answer a request acceptKey did not
// take: with its HTTP error, or, if it upgrades after all, with the frames.
func (s *Server) refuseViaGorilla(w http.ResponseWriter, r *http.Request, frames func(wire.Codec) []byte) {
	ws, err := s.refuser.Upgrade(w, r, nil)
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err, "remote", r.RemoteAddr)
		return
	}
	codec, _ := wire.ForSubprotocol(ws.Subprotocol())
	nc := ws.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, _ = nc.Write(frames(codec))
	_ = nc.Close()
}

// websocketGUID is RFC 6455's magic string for Sec-WebSocket-Accept.
const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// acceptKey checks that r is a WebSocket opening handshake (RFC 6455 §4.2.1,
// the checks gorilla's Upgrade makes) and writes its Sec-WebSocket-Accept
// value to dst. It does not allocate.
func acceptKey(r *http.Request, dst *[28]byte) bool {
	if r.Method != http.MethodGet ||
		!headerHasToken(r.Header, "Connection", "upgrade") ||
		!headerHasToken(r.Header, "Upgrade", "websocket") ||
		!headerHasToken(r.Header, "Sec-Websocket-Version", "13") {
		return false
	}
	key := r.Header.Get("Sec-Websocket-Key")
	var raw [18]byte
	if len(key) != 24 {
		return false
	}
	if n, err := base64.StdEncoding.Decode(raw[:], []byte(key)); err != nil || n != 16 {
		return false
	}
	var in [24 + len(websocketGUID)]byte
	copy(in[copy(in[:], key):], websocketGUID)
	sum := sha1.Sum(in[:])
	base64.StdEncoding.Encode(dst[:], sum[:])
	return true
}

// headerHasToken reports whether a comma-separated header holds token,
// case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h[name] {
		for v != "" {
			var t string
			t, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// selectSubprotocol is the first subprotocol the player offers that the
// gate speaks (the player's order, as gorilla picks), or "".
func selectSubprotocol(r *http.Request) string {
	for _, v := range r.Header["Sec-Websocket-Protocol"] {
		for v != "" {
			var p string
			p, v, _ = strings.Cut(v, ",")
			p = strings.TrimSpace(p)
			for _, ours := range wire.Subprotocols {
				if p == ours {
					return ours
				}
			}
		}
	}
	return ""
}

// errorFrames encodes e, then a close frame with code and reason, for a
// refusal that is not pre-encoded (bad tokens, the admission line).
func (s *Server) errorFrames(e *leveev2.Error, code int, reason string) func(wire.Codec) []byte {
	return func(codec wire.Codec) []byte {
		f := &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: e}}
		data, err := codec.EncodeServer(f, "")
		if err != nil {
			s.log.Error("encoding a refusal", "err", err)
			return appendClose(nil, code, reason)
		}
		return appendClose(appendFrame(nil, messageType(codec), data), code, reason)
	}
}

func messageType(c wire.Codec) int {
	if c.JSON {
		return websocket.TextMessage
	}
	return websocket.BinaryMessage
}

// appendFrame appends one final, unmasked (server to client) WebSocket
// frame of RFC 6455 §5.2 with the given opcode and payload.
func appendFrame(dst []byte, opcode int, payload []byte) []byte {
	dst = append(dst, 0x80|byte(opcode))
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, byte(n))
	case n <= 0xffff:
		dst = append(dst, 126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, payload...)
}

// appendClose appends a close frame with a status code and a reason (at
// most 123 bytes, as control frames carry at most 125).
func appendClose(dst []byte, code int, reason string) []byte {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	p := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), uint16(code))
	return appendFrame(dst, websocket.CloseMessage, append(p, reason...))
}

// fullVariants is how many pre-encoded SERVER_FULL replies there are per
// subprotocol, with retry_after spread evenly over base ±20 %. One is picked
// at random per refusal, so refused players do not come back together.
const fullVariants = 16

// fullCloseReason is the reason text of the 1013 close after SERVER_FULL.
const fullCloseReason = "server full"

// fullReply holds the SERVER_FULL answer, pre-encoded at start: for each
// subprotocol and each jitter variant, the error frame followed by the 1013
// close frame, ready to write as they are.
//
// The protocol has no field for a "while you wait" card, and it is not
// changed for one: the card's text is appended to Error.message after a
// blank line ("<friendly text>\n\n<card>"), so every client shows it as part
// of the message and a client that knows the convention can split it off.
type fullReply struct {
	proto, json [fullVariants][]byte
}

func newFullReply(base time.Duration, card string) (*fullReply, error) {
	r := &fullReply{}
	for i := range fullVariants {
		retry := jittered(base, i)
		f := &leveev2.ServerFrame{Payload: &leveev2.ServerFrame_Error{Error: &leveev2.Error{
			Code:         leveev2.ErrorCode_ERROR_CODE_SERVER_FULL,
			Message:      fullMessage(retry, card),
			RetryAfterMs: uint32(retry.Milliseconds()),
		}}}
		for _, codec := range []wire.Codec{{}, {JSON: true}} {
			data, err := codec.EncodeServer(f, "")
			if err != nil {
				return nil, fmt.Errorf("gate: encoding the server_full reply: %w", err)
			}
			b := appendClose(appendFrame(nil, messageType(codec), data), websocket.CloseTryAgainLater, fullCloseReason)
			if codec.JSON {
				r.json[i] = b
			} else {
				r.proto[i] = b
			}
		}
	}
	return r, nil
}

// jittered is variant i's retry delay: base × (0.8 + 0.4 × i/(fullVariants−1)).
func jittered(base time.Duration, i int) time.Duration {
	f := 0.8 + 0.4*float64(i)/float64(fullVariants-1)
	return time.Duration(float64(base) * f).Round(time.Millisecond)
}

// fullMessage is the human text of a SERVER_FULL refusal.
func fullMessage(retry time.Duration, card string) string {
	secs := max(int(retry.Round(time.Second)/time.Second), 1)
	unit := "seconds"
	if secs == 1 {
		unit = "second"
	}
	msg := fmt.Sprintf("Sorry, the server is full right now. Please try again in about %d %s.", secs, unit)
	if card != "" {
		msg += "\n\n" + card
	}
	return msg
}

// frames picks a variant at random for codec; it does not allocate.
func (r *fullReply) frames(codec wire.Codec) []byte {
	i := rand.IntN(fullVariants)
	if codec.JSON {
		return r.json[i]
	}
	return r.proto[i]
}

// maxCardBytes bounds the "while you wait" card, so the SERVER_FULL frame
// stays small (and well under any client's frame limit).
const maxCardBytes = 2048

// loadCard reads the -full-card-file: UTF-8 text (JSON is fine) of at most
// maxCardBytes, trimmed of surrounding space. No file means no card.
func loadCard(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: -full-card-file %s: %s", ErrInvalidConfig, path, fmt.Sprintf(format, args...))
	}
	f, err := os.Open(path)
	if err != nil {
		return "", bad("%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCardBytes+1))
	if err != nil {
		return "", bad("%v", err)
	}
	if len(b) > maxCardBytes {
		return "", bad("larger than %d bytes", maxCardBytes)
	}
	if !utf8.Valid(b) {
		return "", bad("not UTF-8 text")
	}
	return strings.TrimSpace(string(b)), nil
}

// handshakeRetryAfter is the Retry-After (seconds) of the HTTP 503 sent
// while too many connections are starting. Handshakes finish in about a
// round trip to logic, so a second is plenty; clients add their own jitter.
const handshakeRetryAfter = "1"

// refuseHandshake answers before any upgrade: HTTP 503 with Retry-After.
func refuseHandshake(w http.ResponseWriter) {
	w.Header().Set("Retry-After", handshakeRetryAfter)
	http.Error(w, "too many players are connecting right now, try again shortly", http.StatusServiceUnavailable)
}

// errRateLimited and errInflight are the refusals of the per-connection
// limits; the reply carries retry_after.
var (
	errRateLimited = fmt.Errorf("%w: too many requests on this connection, slow down", apperr.ErrRateLimited)
	errInflight    = fmt.Errorf("%w: too many requests in flight on this connection", apperr.ErrRateLimited)
)
