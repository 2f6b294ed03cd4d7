package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// The histograms' geometry: microseconds from 1 µs to 10 minutes, 3
// significant digits. Values outside the range are clamped into it.
const (
	histLowest  = 1
	histHighest = int64(10 * time.Minute / time.Microsecond)
	histDigits  = 3
)

// Hist is a latency histogram (HDR, 1 µs..10 min, 3 significant digits),
// stored sparsely so that a run's thousands of per-second histograms stay
// small. Its JSON form is a string: the base64 of the standard HdrHistogram
// V2 compressed encoding. The zero value is an empty histogram ready for
// use; a Hist is not safe for concurrent use.
type Hist struct {
	p *hdr.PackedHistogram
}

// NewHist returns an empty histogram.
func NewHist() *Hist {
	return &Hist{p: newPacked()}
}

func newPacked() *hdr.PackedHistogram { return hdr.NewPacked(histLowest, histHighest, histDigits) }

// newDense is the recorder's working form: a flat array, no allocation
// per recorded value.
func newDense() *hdr.Histogram { return hdr.New(histLowest, histHighest, histDigits) }

// micros converts d to the histogram's unit, clamped into its range.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	switch {
	case us < histLowest:
		return histLowest
	case us > histHighest:
		return histHighest
	}
	return us
}

func (h *Hist) init() {
	if h.p == nil {
		h.p = newPacked()
	}
}

// Record adds one value; durations below 1 µs count as 1 µs, above 10
// minutes as 10 minutes.
func (h *Hist) Record(d time.Duration) {
	h.init()
	_ = h.p.RecordValue(micros(d)) // cannot fail: clamped into range
}

// Merge adds o's values to h. o is not changed.
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.p == nil {
		return
	}
	h.init()
	h.p.Merge(o.p)
}

// fromDense replaces h's contents with d's.
func fromDense(d *hdr.Histogram) *Hist {
	h := NewHist()
	h.p.MergeFrom(d)
	return h
}

// Quantile is the value at quantile q in (0,1] (1 is the maximum); 0 when
// the histogram is empty.
func (h *Hist) Quantile(q float64) time.Duration {
	if h == nil || h.p == nil || h.p.TotalCount() == 0 {
		return 0
	}
	return time.Duration(h.p.ValueAtPercentile(q*100)) * time.Microsecond
}

// Count is the number of recorded values.
func (h *Hist) Count() int64 {
	if h == nil || h.p == nil {
		return 0
	}
	return h.p.TotalCount()
}

// Max is the largest recorded value (to the histogram's precision); 0 when
// empty.
func (h *Hist) Max() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.p.Max()) * time.Microsecond
}

// Equal reports whether h and o hold the same counts in the same buckets.
func (h *Hist) Equal(o *Hist) bool {
	a, b := h.buckets(), o.buckets()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type bucket struct{ value, count int64 }

func (h *Hist) buckets() []bucket {
	if h == nil || h.p == nil {
		return nil
	}
	var bs []bucket
	h.p.ForEachBucket(func(v, c int64) bool {
		if c != 0 {
			bs = append(bs, bucket{v, c})
		}
		return true
	})
	return bs
}

// MarshalJSON encodes h as a JSON string: base64 of the HDR V2 compressed
// encoding.
func (h *Hist) MarshalJSON() ([]byte, error) {
	h.init()
	b, err := h.p.Encode()
	if err != nil {
		return nil, fmt.Errorf("record: encoding histogram: %w", err)
	}
	return json.Marshal(string(b))
}

// ErrHistGeometry is returned when a decoded histogram's range or precision
// is not the one this package records with.
var ErrHistGeometry = errors.New("record: histogram has a different geometry than 1µs..10min, 3 digits")

// UnmarshalJSON decodes what MarshalJSON wrote; h is unchanged on error.
func (h *Hist) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("record: histogram is not a JSON string: %w", err)
	}
	p, err := hdr.DecodePacked([]byte(s))
	if err != nil {
		return fmt.Errorf("record: decoding histogram: %w", err)
	}
	if p.LowestTrackableValue() != histLowest || p.HighestTrackableValue() != histHighest || p.SignificantFigures() != histDigits {
		return fmt.Errorf("%w (got %d..%d, %d digits)", ErrHistGeometry, p.LowestTrackableValue(), p.HighestTrackableValue(), p.SignificantFigures())
	}
	h.p = p
	return nil
}
