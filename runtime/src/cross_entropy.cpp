// Placeholder until the cross_entropy runtime lands.
#include "duet/cross_entropy.hpp"
