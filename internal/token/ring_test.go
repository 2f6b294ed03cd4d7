package token

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/clock"
)

var (
	t0      = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	secretA = []byte("secret-a-0123456789")
	secretB = []byte("secret-b-0123456789")
)

func mustRing(t testing.TB, keys ...Key) *Ring {
	t.Helper()
	r, err := NewRing(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRingSignsWithCurrentAndVerifiesOthers(t *testing.T) {
	old := mustRing(t, Key{ID: "a", Secret: secretA, Current: true})
	tokA, err := old.Sign("alice", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tokA, "v2.a.") {
		t.Fatalf("token %q does not carry key id a", tokA)
	}
	// Rotated: b is current, a retires in two hours.
	rotated := mustRing(t, Key{ID: "b", Secret: secretB, Current: true}, Key{ID: "a", Secret: secretA, RetireAt: t0.Add(2 * time.Hour)})
	tokB, _ := rotated.Sign("bob", t0.Add(time.Hour))
	if !strings.HasPrefix(tokB, "v2.b.") {
		t.Fatalf("rotated ring signs %q, want key b", tokB)
	}
	for _, c := range []struct{ tok, want string }{{tokA, "alice"}, {tokB, "bob"}} {
		id, err := rotated.Verify(c.tok, t0, 24*time.Hour)
		if err != nil || id != c.want {
			t.Errorf("Verify(%q) = %q, %v; want %q", c.tok, id, err, c.want)
		}
	}
	// The old ring does not know b.
	if _, err := old.Verify(tokB, t0, 0); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("old ring on a b token: %v, want ErrUnknownKey", err)
	}
	// After a's retirement its tokens are refused, b's still pass.
	late := t0.Add(2 * time.Hour)
	longA, _ := old.Sign("alice", t0.Add(5*time.Hour))
	if _, err := rotated.Verify(longA, late, 0); !errors.Is(err, ErrRetiredKey) || !strings.Contains(err.Error(), `"a" retired at 2026-12-03T14:00:00Z`) {
		t.Errorf("retired key: %v, want ErrRetiredKey naming a and the time", err)
	}
	longB, _ := rotated.Sign("bob", t0.Add(5*time.Hour))
	if id, err := rotated.Verify(longB, late, 0); err != nil || id != "bob" {
		t.Errorf("current key after a's retirement: %q, %v", id, err)
	}
}

func TestRingRefusals(t *testing.T) {
	r := mustRing(t, Key{ID: "a", Secret: secretA, Current: true})
	good, _ := r.Sign("alice", t0.Add(time.Hour))
	forged, _ := SignKey("a", secretB, "alice", t0.Add(time.Hour))
	unknown, _ := SignKey("zz", secretA, "alice", t0.Add(time.Hour))
	far, _ := r.Sign("alice", t0.Add(48*time.Hour))
	v1, _ := Sign(secretA, "alice", t0.Add(time.Hour))
	p := strings.Split(good, ".")
	cases := []struct {
		name string
		tok  string
		now  time.Time
		want error
	}{
		{"expired", good, t0.Add(time.Hour), ErrExpired},
		{"other secret, same kid", forged, t0, ErrSignature},
		{"kid swapped", strings.Replace(good, "v2.a.", "v2.b.", 1), t0, ErrUnknownKey},
		{"unknown kid", unknown, t0, ErrUnknownKey},
		{"forged id", p[0] + "." + p[1] + "." + b64.EncodeToString([]byte("bob")) + "." + p[3] + "." + p[4], t0, ErrSignature},
		{"lifetime", far, t0, ErrLifetime},
		{"v1 without a v1 key", v1, t0, ErrUnknownKey},
		{"bad kid", "v2.a.b.c.d.e", t0, ErrMalformed},
		{"newline", good + "\n", t0, ErrMalformed},
		{"empty", "", t0, ErrMalformed},
		{"other version", "v3.a.YWxpY2U.1.x", t0, ErrMalformed},
		{"huge", "v2." + strings.Repeat("a", 300), t0, ErrMalformed},
	}
	for _, c := range cases {
		if _, err := r.Verify(c.tok, c.now, 24*time.Hour); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestRingV1Migration(t *testing.T) {
	v1, _ := Sign(secretA, "alice", t0.Add(time.Hour))
	// -token-secret alone: v1 tokens as before, and the ring signs v1.
	sr := NewSecretRing(secretA)
	if id, err := sr.Verify(v1, t0, 0); err != nil || id != "alice" {
		t.Fatalf("secret ring on v1: %q, %v", id, err)
	}
	if tok, _ := sr.Sign("bob", t0.Add(time.Hour)); !strings.HasPrefix(tok, "v1.") {
		t.Fatalf("secret ring signs %q, want v1", tok)
	}
	// A ring whose old key keeps "v1": v1 tokens verify until it retires.
	r := mustRing(t, Key{ID: "b", Secret: secretB, Current: true}, Key{ID: "old", Secret: secretA, V1: true, RetireAt: t0.Add(30 * time.Minute)})
	if id, err := r.Verify(v1, t0, 0); err != nil || id != "alice" {
		t.Fatalf("ring with a v1 key on v1: %q, %v", id, err)
	}
	if _, err := r.Verify(v1, t0.Add(30*time.Minute), 0); !errors.Is(err, ErrRetiredKey) {
		t.Fatalf("v1 after the v1 key retired: %v", err)
	}
}

func TestNewRingRefuses(t *testing.T) {
	cases := map[string][]Key{
		"none":            nil,
		"no current":      {{ID: "a", Secret: secretA}},
		"two current":     {{ID: "a", Secret: secretA, Current: true}, {ID: "b", Secret: secretB, Current: true}},
		"duplicate id":    {{ID: "a", Secret: secretA, Current: true}, {ID: "a", Secret: secretB}},
		"bad id":          {{ID: "a.b", Secret: secretA, Current: true}},
		"empty id":        {{ID: "", Secret: secretA, Current: true}},
		"long id":         {{ID: strings.Repeat("k", 33), Secret: secretA, Current: true}},
		"short secret":    {{ID: "a", Secret: []byte("short"), Current: true}},
		"current retires": {{ID: "a", Secret: secretA, Current: true, RetireAt: t0}},
		"two v1":          {{ID: "a", Secret: secretA, Current: true, V1: true}, {ID: "b", Secret: secretB, V1: true}},
	}
	for name, keys := range cases {
		if _, err := NewRing(keys); !errors.Is(err, ErrKeys) {
			t.Errorf("%s: err = %v, want ErrKeys", name, err)
		}
	}
}

func TestParseKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.secret"), append(secretB, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ParseKeys([]byte(`{"keys":[
		{"id":"b","secret_file":"b.secret","current":true},
		{"id":"a","secret":"`+string(secretA)+`","retire_at":"2026-12-03T14:00:00Z","v1":true}]}`), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks := r.Keys()
	if len(ks) != 2 || string(ks[0].Secret) != string(secretB) || !ks[0].Current || !ks[1].RetireAt.Equal(t0.Add(2*time.Hour)) || !ks[1].V1 {
		t.Fatalf("parsed %+v", ks)
	}
	bad := map[string]string{
		"not json":      `{`,
		"unknown field": `{"keys":[{"id":"a","secret":"` + string(secretA) + `","current":true,"retire":"x"}]}`,
		"both secrets":  `{"keys":[{"id":"a","secret":"` + string(secretA) + `","secret_file":"b.secret","current":true}]}`,
		"no secret":     `{"keys":[{"id":"a","current":true}]}`,
		"missing file":  `{"keys":[{"id":"a","secret_file":"nope","current":true}]}`,
		"bad time":      `{"keys":[{"id":"a","secret":"` + string(secretA) + `","current":true},{"id":"b","secret":"` + string(secretB) + `","retire_at":"tomorrow"}]}`,
		"trailing":      `{"keys":[{"id":"a","secret":"` + string(secretA) + `","current":true}]} {}`,
		"empty":         `{"keys":[]}`,
	}
	for name, data := range bad {
		if _, err := ParseKeys([]byte(data), dir, nil); !errors.Is(err, ErrKeys) {
			t.Errorf("%s: err = %v, want ErrKeys", name, err)
		}
	}
}

func writeRing(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileRingReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	writeRing(t, path, `{"keys":[{"id":"a","secret":"`+string(secretA)+`","current":true}]}`)
	clk := clock.NewFake(t0)
	var errs []error
	fr, err := LoadFileRing(path, clk, func(err error) { errs = append(errs, err) })
	if err != nil {
		t.Fatal(err)
	}
	if fr.Ring().Current().ID != "a" {
		t.Fatal("first ring's current key is not a")
	}
	writeRing(t, path, `{"keys":[{"id":"b","secret":"`+string(secretB)+`","current":true},{"id":"a","secret":"`+string(secretA)+`","retire_at":"2026-12-04T00:00:00Z"}]}`)
	if got := fr.Ring().Current().ID; got != "a" {
		t.Fatalf("looked at the file before a second passed: current %q", got)
	}
	clk.Advance(ReloadEvery)
	if got := fr.Ring().Current().ID; got != "b" {
		t.Fatalf("after the change and a second: current %q, want b", got)
	}
	// A bad file keeps the last good ring and is reported once.
	writeRing(t, path, `{"keys":[{"id":"c","secret":"short","current":true}]}`)
	clk.Advance(ReloadEvery)
	if got := fr.Ring().Current().ID; got != "b" {
		t.Fatalf("bad file: current %q, want b kept", got)
	}
	clk.Advance(ReloadEvery)
	fr.Ring()
	if len(errs) != 1 || !errors.Is(errs[0], ErrKeys) {
		t.Fatalf("errors reported: %v, want one ErrKeys", errs)
	}
	// A removed file too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ReloadEvery)
	if got := fr.Ring().Current().ID; got != "b" || len(errs) != 2 {
		t.Fatalf("removed file: current %q, %d errors", got, len(errs))
	}
	// And a good file again is picked up.
	writeRing(t, path, `{"keys":[{"id":"d","secret":"`+string(secretA)+`","current":true}]}`)
	clk.Advance(ReloadEvery)
	if got := fr.Ring().Current().ID; got != "d" {
		t.Fatalf("good file again: current %q, want d", got)
	}
	if _, err := LoadFileRing(filepath.Join(t.TempDir(), "none.json"), clk, nil); !errors.Is(err, ErrKeys) {
		t.Fatalf("missing file at start: %v", err)
	}
}

func FuzzRingVerify(f *testing.F) {
	r := mustRing(f, Key{ID: "b", Secret: secretB, Current: true}, Key{ID: "a", Secret: secretA, V1: true, RetireAt: t0.Add(time.Hour)})
	good, _ := r.Sign("alice", t0.Add(time.Hour))
	v1, _ := Sign(secretA, "alice", t0.Add(time.Hour))
	f.Add(good)
	f.Add(v1)
	f.Add("v2.a..0.")
	f.Add("v2..YWxpY2U.1.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := r.Verify(tok, t0, 24*time.Hour)
		if err != nil {
			if id != "" {
				t.Fatalf("error %v with id %q", err, id)
			}
			return
		}
		if !ValidPlayerID(id) {
			t.Fatalf("accepted invalid id %q", id)
		}
		// Only a token the ring itself would sign passes: re-signing the
		// parsed fields gives the same bytes.
		parts := strings.Split(tok, ".")
		var again string
		exp, _ := parseExpiry(parts[len(parts)-2])
		if parts[0] == "v2" {
			k, _ := r.Lookup(parts[1], t0)
			again, _ = k.Sign(id, time.Unix(exp, 0))
		} else {
			again, _ = Sign(secretA, id, time.Unix(exp, 0))
		}
		if again != tok {
			t.Fatalf("accepted %q, which re-signs as %q", tok, again)
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	f.Add([]byte(`{"keys":[{"id":"a","secret":"0123456789abcdef","current":true}]}`))
	f.Add([]byte(`{"keys":[{"id":"b","secret":"0123456789abcdef","current":true},{"id":"a","secret":"0123456789abcdeg","retire_at":"2026-12-03T14:00:00Z","v1":true}]}`))
	f.Add([]byte(`{"keys":[{"id":"a","secret_file":"x","current":true}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		files := func(string) ([]byte, error) { return []byte("0123456789abcdef\n"), nil }
		r, err := ParseKeys(data, "/nonexistent", files)
		if err != nil {
			if !errors.Is(err, ErrKeys) {
				t.Fatalf("error not ErrKeys: %v", err)
			}
			return
		}
		cur := r.Current()
		if !cur.Current || !ValidKeyID(cur.ID) || len(cur.Secret) < MinSecretLen || !cur.RetireAt.IsZero() {
			t.Fatalf("bad current key %+v", cur)
		}
		tok, err := r.Sign("p", t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if id, err := r.Verify(tok, t0, 0); err != nil || id != "p" {
			t.Fatalf("own token: %q, %v", id, err)
		}
	})
}

// TestKeysDocExample keeps docs/keys.md's v2 example true.
func TestKeysDocExample(t *testing.T) {
	const tok = "v2.2026-12.YWxpY2U.1767225600.AYhK5tdhgzEw4Ne8bc2RtkhtNvrFv_kZ3B27vzvo8-Q"
	doc, err := os.ReadFile("../../docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), tok) {
		t.Error("docs/keys.md does not show the v2 example token")
	}
	r := mustRing(t, Key{ID: "2026-12", Secret: []byte("example-secret-long"), Current: true})
	r.keys[0].Secret = []byte("example-secret") // the doc's short example secret, past NewRing's minimum
	if id, err := r.Verify(tok, time.Unix(1767225600-1, 0), 0); err != nil || id != "alice" {
		t.Fatalf("the example does not verify: %q, %v", id, err)
	}
}
