package producer

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/base"
)

// Errors of Check and CheckMarker: the batch or marker is refused and the
// caller writes nothing. Package log returns these very values under the
// same names (log.ErrOutOfOrderSequence, ...), so errors.Is works with
// either; the returned error names the producer id, the epochs and the
// sequences.
var (
	// ErrOutOfOrderSequence marks a batch whose first sequence does not
	// follow the producer's last one (a gap, or a sequence from the past
	// that is not one of its last five batches), or a new epoch that does
	// not start at sequence 0. Kafka error code:
	// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("partlog: out of order sequence number")

	// ErrInvalidProducerEpoch marks a batch or marker whose producer epoch
	// is older than the producer's current one: a fenced producer. Kafka
	// error code: INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("partlog: invalid producer epoch")

	// ErrInvalidTxnState marks a non-transactional batch from a producer
	// whose transaction is open. Kafka error code: INVALID_TXN_STATE (48).
	ErrInvalidTxnState = errors.New("partlog: invalid transaction state")

	// ErrTransactionCoordinatorFenced marks a transaction marker whose
	// coordinator epoch is older than the one of the producer's last
	// marker. Kafka error code: TRANSACTION_COORDINATOR_FENCED (52).
	ErrTransactionCoordinatorFenced = errors.New("partlog: transaction coordinator fenced")
)

// ErrCorruptSnapshot marks producer snapshot bytes that do not decode: a
// version other than 1, a CRC-32C mismatch, a count that disagrees with
// the length, or fewer bytes than the header. It wraps base.ErrCorrupt,
// the module's corruption marker (Kafka: CORRUPT_MESSAGE (2)). A partition
// skips such a file and uses an older snapshot or replays its log.
var ErrCorruptSnapshot = fmt.Errorf("%w: producer state snapshot", base.ErrCorrupt)
