package apperr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// hop sends a status error over the wire as gRPC does: marshalled into
// grpc-status-details-bin and parsed back on the other side.
func hop(t *testing.T, err error) error {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is not a status", err)
	}
	b, merr := proto.Marshal(st.Proto())
	if merr != nil {
		t.Fatal(merr)
	}
	var p spb.Status
	if err := proto.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return status.ErrorProto(&p)
}

func TestEveryCodeHasOneRow(t *testing.T) {
	for n := range leveev2.ErrorCode_name {
		code := leveev2.ErrorCode(n)
		if code == leveev2.ErrorCode_ERROR_CODE_UNSPECIFIED {
			continue
		}
		if rowOf(code) == unknownRow {
			t.Errorf("%v has no row in the table", code)
		}
	}
}

// TestRoundTripEveryRow: domain error -> status -> (the wire) -> domain
// error keeps the sentinel (errors.Is), the code, the retry delay and the
// backpressure, for every row, and matches no other row's sentinel.
func TestRoundTripEveryRow(t *testing.T) {
	for _, r := range table {
		t.Run(r.outcome, func(t *testing.T) {
			sent := fmt.Errorf("shard 3: %w", r.err)
			back := FromStatus(hop(t, Overloaded(context.Background(), sent, 250*time.Millisecond, 42, 0.93)))
			if !errors.Is(back, r.err) {
				t.Fatalf("errors.Is(FromStatus(%v), sentinel) is false; got %v", sent, back.Code)
			}
			if back.Code != r.code || Code(back) != r.code {
				t.Fatalf("code %v (Code %v), want %v", back.Code, Code(back), r.code)
			}
			for _, o := range table {
				if o.code != r.code && errors.Is(back, o.err) {
					t.Fatalf("%v also matches %v", r.code, o.err)
				}
			}
			if back.RetryAfter != 250*time.Millisecond {
				t.Fatalf("retry after %v", back.RetryAfter)
			}
			if want := (&leveev2.Backpressure{QueueDepth: 42, Ratio: 0.93, RetryAfterMs: 250}); !proto.Equal(back.Backpressure, want) {
				t.Fatalf("backpressure %v, want %v", back.Backpressure, want)
			}
			if back.Message != sent.Error() {
				t.Fatalf("message %q, want %q", back.Message, sent.Error())
			}
			if c := status.Code(ToStatus(context.Background(), sent, 0)); c != r.grpc {
				t.Fatalf("gRPC code %v, want %v", c, r.grpc)
			}
			// Without hints: no backpressure, and a second hop (a tier
			// passing the error on) keeps the code.
			plain := FromStatus(hop(t, ToStatus(context.Background(), sent, 0)))
			if plain.Backpressure != nil || plain.RetryAfter != 0 || plain.Code != r.code {
				t.Fatalf("plain refusal came back as %+v", plain)
			}
			again := FromStatus(hop(t, ToStatus(context.Background(), fmt.Errorf("battle: %w", plain), 0)))
			if again.Code != r.code || !errors.Is(again, r.err) {
				t.Fatalf("second hop: %v", again.Code)
			}
		})
	}
}

// TestServerFullAndRateLimitedAreNotBusy is the lossy mapping this table
// replaced: every RESOURCE_EXHAUSTED came back as BUSY (and SHUTTING_DOWN
// as UNAVAILABLE, INSUFFICIENT_GOLD and NOT_ADMITTED as INTERNAL).
func TestServerFullAndRateLimitedAreNotBusy(t *testing.T) {
	for _, c := range []struct {
		err  error
		code leveev2.ErrorCode
	}{
		{ErrServerFull, leveev2.ErrorCode_ERROR_CODE_SERVER_FULL},
		{ErrRateLimited, leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED},
		{ErrShuttingDown, leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN},
		{ErrRejected, leveev2.ErrorCode_ERROR_CODE_REJECTED},
		{ErrNotAdmitted, leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED},
		{ErrRequestExpired, leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED},
		{ErrTicketInUse, leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE},
	} {
		back := FromStatus(hop(t, ToStatus(context.Background(), c.err, 0)))
		if got := back.Player().GetCode(); got != c.code {
			t.Errorf("%v: came back as %v, want %v", c.err, got, c.code)
		}
		if c.code != leveev2.ErrorCode_ERROR_CODE_BUSY && errors.Is(back, ErrBusy) {
			t.Errorf("%v: came back as busy", c.err)
		}
	}
}

// TestBareStatusesMapByGRPCCode: gRPC's own statuses carry no details; they
// map by their code, and what players see of Unavailable and Internal is
// sanitized.
func TestBareStatusesMapByGRPCCode(t *testing.T) {
	for _, c := range []struct {
		st    error
		code  leveev2.ErrorCode
		msg   string // "" means the status's
		retry uint32
	}{
		{status.Error(codes.Unavailable, "connection error: dial tcp 10.0.0.7:9000: connect: connection refused"),
			leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE, "service unavailable, try again later", 1000},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED, "the request ran out of time", 0},
		{status.Error(codes.Canceled, "context canceled"), leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED, "the request ran out of time", 0},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), leveev2.ErrorCode_ERROR_CODE_BUSY, "", 100},
		{status.Error(codes.InvalidArgument, "bad"), leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST, "", 0},
		{status.Error(codes.Unimplemented, "unknown method"), leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, "", 0},
		{status.Error(codes.FailedPrecondition, "wrong shard: player on 10.0.0.8"), leveev2.ErrorCode_ERROR_CODE_INTERNAL, "internal error", 0},
		{status.Error(codes.Internal, "panic: runtime error at store.go:81"), leveev2.ErrorCode_ERROR_CODE_INTERNAL, "internal error", 0},
		{status.Error(codes.Unknown, "secret"), leveev2.ErrorCode_ERROR_CODE_INTERNAL, "internal error", 0},
		{errors.New("not a status"), leveev2.ErrorCode_ERROR_CODE_INTERNAL, "internal error", 0},
	} {
		p := FromStatus(c.st).Player()
		msg := c.msg
		if msg == "" {
			msg = status.Convert(c.st).Message()
		}
		if p.GetCode() != c.code || p.GetMessage() != msg || p.GetRetryAfterMs() != c.retry {
			t.Errorf("%v: player sees %v, want %v %q retry %d", c.st, p, c.code, msg, c.retry)
		}
	}
	// With details, the sanitizing still applies.
	leak := fmt.Errorf("%w: battle 10.0.0.9:9100: connection refused", ErrUnavailable)
	if p := FromStatus(hop(t, ToStatus(context.Background(), leak, 0))).Player(); p.GetMessage() != "service unavailable, try again later" || p.GetRetryAfterMs() != 1000 {
		t.Errorf("unavailable with details: %v", p)
	}
	if FromStatus(nil) != nil {
		t.Error("FromStatus(nil) is not nil")
	}
}

func TestPlayerRetryAfter(t *testing.T) {
	// The callee's delay wins, then its backpressure's, then the default.
	e := &Error{Code: leveev2.ErrorCode_ERROR_CODE_BUSY, RetryAfter: 250 * time.Millisecond, Backpressure: &leveev2.Backpressure{RetryAfterMs: 7}}
	if ms := e.Player().GetRetryAfterMs(); ms != 250 {
		t.Fatalf("retry %d", ms)
	}
	e.RetryAfter = 0
	if ms := e.Player().GetRetryAfterMs(); ms != 7 {
		t.Fatalf("retry %d", ms)
	}
	e.Backpressure = nil
	if ms := e.Player().GetRetryAfterMs(); ms != 100 {
		t.Fatalf("retry %d", ms)
	}
}

// TestProperties pins what players and the SDK rely on, as the README's
// table states it.
func TestProperties(t *testing.T) {
	type props struct {
		class                         RetryClass
		overload, business, permanent bool
		close                         int
	}
	want := map[leveev2.ErrorCode]props{
		leveev2.ErrorCode_ERROR_CODE_BAD_REQUEST:       {Final, false, false, true, CloseInternalError},
		leveev2.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE:   {Final, false, false, true, CloseInternalError},
		leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED:      {Final, false, false, true, ClosePolicyViolation},
		leveev2.ErrorCode_ERROR_CODE_FORBIDDEN:         {Final, false, true, true, ClosePolicyViolation},
		leveev2.ErrorCode_ERROR_CODE_TICKET_IN_USE:     {Final, false, false, true, ClosePolicyViolation},
		leveev2.ErrorCode_ERROR_CODE_NOT_FOUND:         {Final, false, true, false, CloseInternalError},
		leveev2.ErrorCode_ERROR_CODE_REJECTED:          {Final, false, true, false, CloseInternalError},
		leveev2.ErrorCode_ERROR_CODE_REQUEST_EXPIRED:   {Final, false, false, false, CloseInternalError},
		leveev2.ErrorCode_ERROR_CODE_INTERNAL:          {Final, false, false, false, CloseInternalError},
		leveev2.ErrorCode_ERROR_CODE_BUSY:              {NotExecuted, true, false, false, CloseTryAgainLater},
		leveev2.ErrorCode_ERROR_CODE_SERVER_FULL:       {NotExecuted, true, false, false, CloseTryAgainLater},
		leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED:      {NotExecuted, true, false, false, CloseTryAgainLater},
		leveev2.ErrorCode_ERROR_CODE_NOT_ADMITTED:      {NotExecuted, false, false, false, CloseTryAgainLater},
		leveev2.ErrorCode_ERROR_CODE_SHUTTING_DOWN:     {OutcomeUnknown, false, false, false, CloseServiceRestart},
		leveev2.ErrorCode_ERROR_CODE_UNAVAILABLE:       {OutcomeUnknown, false, false, false, CloseTryAgainLater},
		leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED: {OutcomeUnknown, false, false, false, CloseTryAgainLater},
		leveev2.ErrorCode(99):                          {Final, false, false, false, CloseInternalError}, // a newer tier's
	}
	for code, w := range want {
		got := props{Class(code), Overload(code), Business(code), Permanent(code), LoginCloseCode(code)}
		if got != w {
			t.Errorf("%v: %+v, want %+v", code, got, w)
		}
	}
	if Outcome(leveev2.ErrorCode_ERROR_CODE_REJECTED) != "rejected" || Outcome(99) != "unknown" {
		t.Errorf("outcome labels %q %q", Outcome(leveev2.ErrorCode_ERROR_CODE_REJECTED), Outcome(99))
	}
	for status, code := range map[int]leveev2.ErrorCode{
		401: leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED, 403: leveev2.ErrorCode_ERROR_CODE_FORBIDDEN,
		429: leveev2.ErrorCode_ERROR_CODE_RATE_LIMITED, 503: leveev2.ErrorCode_ERROR_CODE_SERVER_FULL,
	} {
		if got, ok := FromHTTP(status); !ok || got != code {
			t.Errorf("HTTP %d: %v", status, got)
		}
	}
	if _, ok := FromHTTP(400); ok {
		t.Error("HTTP 400 has a code")
	}
}

func TestWrappedErrorsMapLikeTheirSentinel(t *testing.T) {
	err := fmt.Errorf("buy sword: %w", ErrRejected)
	if got := Code(err); got != leveev2.ErrorCode_ERROR_CODE_REJECTED {
		t.Fatalf("Code = %v", got)
	}
	if got := GRPCCode(err); got != codes.FailedPrecondition {
		t.Fatalf("GRPCCode = %v", got)
	}
	if got := Code(fmt.Errorf("x: %w", context.DeadlineExceeded)); got != leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED {
		t.Fatalf("deadline Code = %v", got)
	}
	if got := Code(fmt.Errorf("surprise")); got != leveev2.ErrorCode_ERROR_CODE_INTERNAL {
		t.Fatalf("unknown error Code = %v", got)
	}
	// The first row wins: a deadline inside an internal error is a deadline.
	if got := Code(fmt.Errorf("%w: store: %w", ErrInternal, context.DeadlineExceeded)); got != leveev2.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED {
		t.Fatalf("internal+deadline Code = %v", got)
	}
	// Context errors keep their own gRPC codes.
	if c := status.Code(ToStatus(context.Background(), context.Canceled, 0)); c != codes.Canceled {
		t.Fatalf("canceled travels as %v", c)
	}
	if c := status.Code(ToStatus(context.Background(), fmt.Errorf("w: %w", context.DeadlineExceeded), 0)); c != codes.DeadlineExceeded {
		t.Fatalf("deadline travels as %v", c)
	}
	// A status is passed on as it is.
	st := status.Error(codes.NotFound, "x")
	if ToStatus(context.Background(), st, 0) != st {
		t.Fatal("status re-encoded")
	}
}

// A code this build has no row for (a newer tier's) is passed on as it
// came, and is final.
func TestUnknownCodeIsPassedOn(t *testing.T) {
	st, _ := status.New(codes.Aborted, "new thing").WithDetails(&leveev2.Error{Code: 99})
	back := FromStatus(hop(t, st.Err()))
	if back.Code != 99 || Code(back) != 99 || back.Player().GetMessage() != "new thing" {
		t.Fatalf("got %+v", back)
	}
	if again := FromStatus(hop(t, ToStatus(context.Background(), fmt.Errorf("logic: %w", back), 0))); again.Code != 99 {
		t.Fatalf("passed on as %v", again.Code)
	}
}

func TestNewBackpressureClamps(t *testing.T) {
	for _, c := range []struct {
		depth int
		ratio float64
		want  *leveev2.Backpressure
	}{
		{5, 0.5, &leveev2.Backpressure{QueueDepth: 5, Ratio: 0.5, RetryAfterMs: 20}},
		{-1, 7, &leveev2.Backpressure{QueueDepth: 0, Ratio: 1, RetryAfterMs: 20}},
		{1 << 40, -3, &leveev2.Backpressure{QueueDepth: 1<<32 - 1, Ratio: 0, RetryAfterMs: 20}},
	} {
		if got := NewBackpressure(c.depth, c.ratio, 20*time.Millisecond); !proto.Equal(got, c.want) {
			t.Errorf("NewBackpressure(%d, %v) = %v, want %v", c.depth, c.ratio, got, c.want)
		}
	}
}

// trailerStream records the trailer a handler sets.
type trailerStream struct {
	mu      sync.Mutex
	trailer metadata.MD
}

func (s *trailerStream) Method() string               { return "/levee.v2.Logic/Do" }
func (s *trailerStream) SetHeader(metadata.MD) error  { return nil }
func (s *trailerStream) SendHeader(metadata.MD) error { return nil }
func (s *trailerStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

// The retry delay still goes in grpc-retry-pushback-ms for gRPC's own retry
// logic, and no other trailer is set: the hints are in the details.
func TestOnlyThePushbackTrailer(t *testing.T) {
	ts := &trailerStream{}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), ts)
	_ = Overloaded(ctx, ErrBusy, 1500*time.Millisecond, 3, 0.5)
	if got := ts.trailer.Get(PushbackKey); len(got) != 1 || got[0] != "1500" {
		t.Fatalf("pushback trailer %v", got)
	}
	if len(ts.trailer) != 1 {
		t.Fatalf("trailer %v, want only %s", ts.trailer, PushbackKey)
	}
}

// TestNoOtherErrorTable: outside this package no code switches on an
// ErrorCode or a gRPC code, or keeps a map keyed by ErrorCode; the table's
// properties are asked of it instead. (Constructing an error with a code is
// fine.)
func TestNoOtherErrorTable(t *testing.T) {
	root := filepath.Join("..", "..")
	bad := regexp.MustCompile(`case leveev2\.ErrorCode_|case codes\.[A-Z]|map\[leveev2\.ErrorCode\]`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" || path == filepath.Join(root, "internal", "apperr") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bad.MatchString(line) {
				t.Errorf("%s:%d: a second error table: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A game's error is its kind's row, and its reply carries the game's
// reason and message (not the kind's text).
func TestGameErrorReply(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &GameError{Kind: ErrRejected, Reason: "insufficient_gold", Message: "you need 40 more gold"})
	if Code(err) != leveev2.ErrorCode_ERROR_CODE_REJECTED || !errors.Is(err, ErrRejected) {
		t.Fatalf("Code = %v", Code(err))
	}
	r := Reply(err, 0)
	if r.GetReason() != "insufficient_gold" || r.GetMessage() != "you need 40 more gold" || r.GetCode() != leveev2.ErrorCode_ERROR_CODE_REJECTED {
		t.Fatalf("Reply = %v", r)
	}
	if r := Reply(ErrBusy, 0); r.GetReason() != "" {
		t.Fatalf("a Levee error has a reason: %v", r)
	}
}
