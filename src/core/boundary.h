/* The boundary: the vats that someone outside their system waits on. The
 * system keeps no list of its vats (a vat nobody refers to must stay
 * collectable), but at shutdown it must end, for those outside, the vats
 * they wait on. So it keeps those only, weakly. */
#ifndef VAT_CORE_BOUNDARY_H
#define VAT_CORE_BOUNDARY_H

#include "core/vat.h"

/** Records that `v` holds state someone outside its system waits on: a
 *  request from a host thread or another system, a link or a monitor with
 *  a vat of another system. At shutdown, such vats break what they owe and
 *  fire those links and monitors with `shutdown`. Only from v's own turns;
 *  once per vat, so it costs nothing per message. */
void vat__boundary_note(vat__vat *v);

/** After sys's workers stopped: runs the modules' stranded hook on every
 *  noted vat still alive, with `shutdown`. */
void vat__boundary_settle(vat_system *sys);

#endif
