/* images.h — internal: the consumer state's images (images.c). */
#ifndef SPY_CONSUMER_IMAGES_H
#define SPY_CONSUMER_IMAGES_H

#include "spyglass/consumer.h"

void spy__state_images_free(spy_state *s);

#endif
