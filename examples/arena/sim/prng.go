package sim

// rng is splitmix64: small, fast, and fully determined by its seed, so a
// battle replays exactly. It is not safe for concurrent use; every simulation
// owns its own.
type rng struct{ state uint64 }

func newRNG(seed uint64) rng { return rng{state: seed} }

// next returns the next 64 pseudo-random bits.
func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	return mix64(r.state)
}

// intn returns a number in [0, n) for n > 0 (Lemire's multiply-shift; the
// bias is below 2^-25 for the small n a battle uses).
func (r *rng) intn(n int) int {
	return int((r.next() >> 32) * uint64(n) >> 32)
}

// mix64 is the splitmix64 finalizer: a bijective avalanche of z.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
