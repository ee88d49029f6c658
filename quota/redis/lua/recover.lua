-- recover.lua: epochs, and recovering a budget's state after a loss.
--
-- The epoch names one life of a budget's state: a new one begins when its
-- state hash is created. A caller that saw another epoch and finds the hash
-- gone, or recreated by a caller that could not tell it was lost (ef),
-- knows the state was lost (a restart without persistence, a failover, an
-- eviction) and recovers it. A caller that saw none cannot tell a lost
-- budget from a new one. Every operation that writes checks its budgets'
-- epochs first (upkeep.lua, which holds begin and recover); this file
-- holds what others need too.

-- counted returns the use of budget b's j-th daily limit a's current
-- window once the caller's view of it is counted, and what the views
-- counted so far come to (kept as r<a>, "start use"), or nil when the
-- caller's view adds nothing. A window recovered after a loss (lost) holds
-- what was used since (by callers that could not tell it was lost) plus
-- what the recovering caller saw; every caller that saw the lost epoch
-- adds what it saw beyond the views counted before it, so grants the
-- recovering caller had not seen are charged as soon as a caller that saw
-- them comes back. A window recovered by a release that kept no r<a> is
-- raised to the caller's view, as that release did.
local function counted(b, a, j, lost)
  -- u is the use of the window the caller last saw, 0 if it saw another
  -- window or none.
  local ws, u = string.match(b.seen[j], '^(%S+) (%S+)$')
  if ws and tonumber(ws) == a.ws then u = tonumber(u) else u = 0 end
  local d = used(a)
  if lost then return d + u, u end
  local r
  ws, r = string.match(b.st['r' .. a.id] or '', '^(%S+) (%S+)$')
  if ws and tonumber(ws) == a.ws then
    r = tonumber(r)
    if u > r then return d + u - r, u end
  elseif u > d then
    return u, nil
  end
  return nil, nil
end

-- regrant keeps, for ticket id whose record is gone, the grant it held on
-- every budget with a concurrency limit: its own lease where it still has
-- one (the record alone was evicted), else a placeholder recover left,
-- until x (formatted µs), or releases it when x is nil. A placeholder goes
-- only to a ticket whose caller proves it was granted in the epoch lost:
-- proofs holds, per budget (root first), the epoch the caller was granted
-- the ticket in, or ''. It reports whether the ticket held a grant so,
-- changing nothing when one budget cannot say it did: never on budgets
-- without a concurrency limit, where no lease says which calls ran.
local function regrant(id, x, proofs)
  local takes, any = {}, false
  for _, b in ipairs(budgets) do
    if b.conc then
      any = true
      local held = redis.call('ZSCORE', b.L, id)
      if not (held and tonumber(held) > now) then
        local rv, lp = b.st['rv'], tonumber(b.st['lp'] or '0')
        local proof = proofs[b == root and 1 or 2]
        if lp < 1 or tonumber(rv) <= now or proof == '' or proof ~= b.st['pe'] or
          not redis.call('ZSCORE', b.L, PLACEHOLDER .. rv .. ' ' .. lp) then
          return false
        end
        takes[#takes + 1] = b
      end
    end
  end
  if not any then return false end
  for _, b in ipairs(takes) do
    local lp = tonumber(b.st['lp'])
    redis.call('ZREM', b.L, PLACEHOLDER .. b.st['rv'] .. ' ' .. lp)
    put(b, 'lp', fmt(lp - 1))
  end
  for _, b in ipairs(budgets) do
    if b.conc then
      if x then redis.call('ZADD', b.L, x, id) else redis.call('ZREM', b.L, id) end
    end
  end
  return true
end

