package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSubcommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "usage: craft gate|logic|battle|loadtest"},
		{[]string{"forge"}, 2, `unknown command "forge"`},
		{[]string{"help"}, 0, "usage:"},
	} {
		var out bytes.Buffer
		if code := run(tc.args, &out); code != tc.code || !strings.Contains(out.String(), tc.says) {
			t.Errorf("craft %v: exit %d, %q; want %d and %q", tc.args, code, out.String(), tc.code, tc.says)
		}
	}
}

// A tier's bad flag is that tier's usage error, with the game declared.
func TestTierFlagsAreTheTiers(t *testing.T) {
	if code := run([]string{"logic", "-no-such-flag"}, &bytes.Buffer{}); code != 2 {
		t.Fatalf("craft logic -no-such-flag: exit %d, want 2", code)
	}
}
