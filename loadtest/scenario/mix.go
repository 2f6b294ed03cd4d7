package scenario

// Mix is each kind of request's share of the players' mix (Act.Do ->
// the sum of its actions' weights / the sum of all weights); nil when
// the mix is empty. The login's profile fetch is not part of it.
func (s *Scenario) Mix() map[string]float64 {
	total := 0.0
	for _, a := range s.Players.Actions {
		total += a.Weight
	}
	if !(total > 0) {
		return nil
	}
	m := map[string]float64{}
	for _, a := range s.Players.Actions {
		m[a.Do] += a.Weight / total
	}
	return m
}
