// Placeholder until the masked_softmax runtime lands.
#include "duet/masked_softmax.hpp"
