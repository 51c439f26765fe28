/* zones.hpp — CPU zones from C++: a scope object that opens a zone where it
 * is made and closes it where it goes out of scope (see zones.h).
 *
 *   void update(spy_provider *p) {
 *     SPY_ZONE_SCOPE(p, "update");       // compiled out without SPY_ENABLE
 *     ...
 *   }
 *
 * spy::zone is neither copyable nor movable: one scope,
 * one zone. zones.h itself compiles as C++ too (no C11 atomics in it).
 */
#ifndef SPYGLASS_ZONES_HPP
#define SPYGLASS_ZONES_HPP

#include "spyglass/zones.h"

namespace spy {

class zone {
public:
  zone(spy_provider *p, spy_zone_loc *loc) : p_(p) { spy_zone_begin(p, loc); }
  ~zone() { spy_zone_end(p_); }
  zone(const zone &) = delete;
  zone &operator=(const zone &) = delete;

private:
  spy_provider *p_;
};

} // namespace spy

#ifdef SPY_ENABLE
#define SPY_ZONE_SCOPE_C(p, name, color)                                       \
  SPY__ZONE_SCOPE_N(p, name, color, __COUNTER__)
#define SPY__ZONE_SCOPE_N(p, name, color, n)                                   \
  static spy_zone_loc SPY__ZCAT(spy__zloc_, n) = {                             \
      (name), __func__, __FILE__, (uint32_t)__LINE__, (uint32_t)(color), 0};   \
  spy::zone SPY__ZCAT(spy__zscope_, n)((p), &SPY__ZCAT(spy__zloc_, n))
#else
#define SPY_ZONE_SCOPE_C(p, name, color) ((void)0)
#endif
#define SPY_ZONE_SCOPE(p, name) SPY_ZONE_SCOPE_C(p, name, 0)

#endif
