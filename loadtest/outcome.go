package loadtest

import (
	"context"
	"errors"
	"strconv"

	"levee/client"
	"levee/loadtest/target"
)

// dialReason names why a dial failed, for the report.
func dialReason(err error) string {
	if e := client.AsError(err); e != nil {
		return client.CodeName(e.Code)
	}
	if code := client.CloseCode(err); code != 0 {
		return closeReason(code)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return LostTimeout
	case errors.Is(err, context.Canceled):
		return LostInterrupted
	case errors.Is(err, target.ErrNonLocal):
		return "nonlocal"
	case errors.Is(err, client.ErrClosed):
		return LostClosed
	}
	return LostOther
}

func closeReason(code int) string {
	return "close " + strconv.Itoa(code)
}

// disconnectReason names why a connection ended before its bot was done.
func disconnectReason(err error) string {
	if code := client.CloseCode(err); code != 0 {
		return closeReason(code)
	}
	if errors.Is(err, client.ErrProtocol) {
		return "protocol"
	}
	return "dropped"
}
