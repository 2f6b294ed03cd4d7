package token_test

import (
	"fmt"
	"time"

	"github.com/leveehq/levee/internal/token"
)

// The example of the format's definition (the package doc and the Tokens
// section of docs/protocol.md): go test checks the output, and
// TestREADMEExample that docs/protocol.md shows the same token.
func ExampleSign() {
	tok, err := token.Sign([]byte("example-secret"), "alice", time.Unix(1767225600, 0))
	if err != nil {
		panic(err)
	}
	fmt.Println(tok)
	// Output: v1.YWxpY2U.1767225600.-RW-b-OTZTbRELzzDo3jy1n9Kwra2B_XqaL_lEbKjWk
}

// A v2 token under key id "2026-12" (docs/keys.md shows this one, and
// TestKeysDocExample checks it does).
func ExampleSignKey() {
	tok, err := token.SignKey("2026-12", []byte("example-secret"), "alice", time.Unix(1767225600, 0))
	if err != nil {
		panic(err)
	}
	fmt.Println(tok)
	// Output: v2.2026-12.YWxpY2U.1767225600.AYhK5tdhgzEw4Ne8bc2RtkhtNvrFv_kZ3B27vzvo8-Q
}
