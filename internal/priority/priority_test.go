package priority

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"levee/internal/shed"
	leveev1 "levee/proto/leveev1"
)

func TestTravelsThroughMetadata(t *testing.T) {
	for _, c := range []leveev1.Criticality{
		leveev1.Criticality_CRITICALITY_CRITICAL,
		leveev1.Criticality_CRITICALITY_DEFAULT,
		leveev1.Criticality_CRITICALITY_SHEDDABLE,
	} {
		out := Outgoing(context.Background(), c)
		md, _ := metadata.FromOutgoingContext(out)
		in := metadata.NewIncomingContext(context.Background(), md)
		if got := FromIncoming(in); got != c {
			t.Fatalf("%v arrived as %v", c, got)
		}
	}
	if got := FromIncoming(context.Background()); got != leveev1.Criticality_CRITICALITY_DEFAULT {
		t.Fatalf("no metadata = %v, want DEFAULT", got)
	}
	if Normalize(leveev1.Criticality_CRITICALITY_UNSPECIFIED) != leveev1.Criticality_CRITICALITY_DEFAULT || Normalize(99) != leveev1.Criticality_CRITICALITY_DEFAULT {
		t.Fatal("Normalize")
	}
	if Shed(leveev1.Criticality_CRITICALITY_SHEDDABLE) != shed.Sheddable || Shed(leveev1.Criticality_CRITICALITY_CRITICAL) != shed.Critical || Shed(0) != shed.Default {
		t.Fatal("Shed mapping")
	}
}
