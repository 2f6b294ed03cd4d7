package loadtestcmd

import (
	"fmt"

	"github.com/leveehq/levee/internal/token"
)

// signingKey is the key the load tool signs player tokens with: the
// current key of the ring in keysFile (a v2 key id and its secret), or
// secret with no key id (v1 tokens) when keysFile is empty.
func signingKey(secret, keysFile string) (kid, key string, err error) {
	if keysFile == "" {
		return "", secret, nil
	}
	r, err := token.LoadFileRing(keysFile, nil, nil)
	if err != nil {
		return "", "", fmt.Errorf("-token-keys: %w", err)
	}
	cur := r.Ring().Current()
	return cur.ID, string(cur.Secret), nil
}
