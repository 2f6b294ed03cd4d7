package logic

import (
	"fmt"

	"github.com/leveehq/levee/internal/apperr"
)

// catalog is the shop: item id -> price in gold.
var catalog = map[string]int64{
	"potion":      10,
	"sword":       100,
	"shield":      80,
	"helmet":      60,
	"dragon_skin": 500,
}

// Bounds on a purchase's quantity.
const (
	minQuantity = 1
	maxQuantity = 100
)

// checkQuantity checks a purchase's quantity, which can be checked before
// it reaches a shard: a quantity out of range is a malformed request.
func checkQuantity(quantity int32) error {
	if quantity < minQuantity || quantity > maxQuantity {
		return fmt.Errorf("%w: quantity must be %d..%d, got %d", apperr.ErrBadRequest, minQuantity, maxQuantity, quantity)
	}
	return nil
}

// priceOf checks a purchase and returns what it costs. An item not in the
// shop is a business error (NOT_FOUND), the purchase's final outcome.
func priceOf(item string, quantity int32) (int64, error) {
	if err := checkQuantity(quantity); err != nil {
		return 0, err
	}
	price, ok := catalog[item]
	if !ok {
		if len(item) > 64 {
			item = item[:64] + "..."
		}
		return 0, fmt.Errorf("%w: no item %q in the shop", apperr.ErrNotFound, item)
	}
	return price * int64(quantity), nil
}
