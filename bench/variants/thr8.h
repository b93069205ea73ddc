// The running softmax maximum moves only when a tile's exceeds it by more than 8 (log2
// units), so O's rescale is skipped more often.
#define ATTNKIT_FLASH_RESCALE_THRESHOLD 8.0f
