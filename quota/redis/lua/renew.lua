-- renew.lua: quota.Store.Renew.
--
-- ARGV after common.lua's: the ticket, the TTL µs (within the policy's
-- lease TTL), the epochs the caller was granted it in (the root's, then
-- the tenant's budget's; '' when it was not, see regrant).
--
-- The grant's record and leases live that long from now, unless they
-- already live longer. A ticket whose record is gone keeps the grant it
-- held (regrant).
--
-- Reply: the time the grant now has left in µs, or '' if the ticket is not
-- held as granted; {-1, tenant} for a ticket reserved under another tenant.

local ticketID = arg()
local exp = now + tonumber(arg())
local proofs = {arg(), arg()}

local t, other = ticket()
if other then return wrongTenant(other) end
if not t then
  if regrant(ticketID, fmt(exp), proofs) then return done(fmt(exp - now)) end
  return done('')
end
if t.s ~= 'g' then return done('') end
if tonumber(t.x) > exp then exp = tonumber(t.x) end
local x = fmt(exp)
for _, b in ipairs(budgets) do
  if b.conc then redis.call('ZADD', b.L, 'XX', x, ticketID) end
end
saveTicket(t, ticketID, exp, x)
return done(fmt(exp - now))
