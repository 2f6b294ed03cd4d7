package sim

// FNV-1a 64-bit parameters.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnv64a is an FNV-1a hash fed 64-bit words, little-endian byte by byte, so
// the result is the FNV-1a of the byte stream the words spell.
type fnv64a uint64

func newFNV() fnv64a { return fnvOffset64 }

func (h *fnv64a) word(v uint64) {
	x := uint64(*h)
	for range 8 {
		x ^= v & 0xff
		x *= fnvPrime64
		v >>= 8
	}
	*h = fnv64a(x)
}
