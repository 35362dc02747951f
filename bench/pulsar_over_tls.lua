-- tshark -X lua_script:bench/pulsar_over_tls.lua -X lua_script1:6650,6651 ...: the Pulsar
-- plugin registers on TCP port 6650 only; this hands it TLS's decrypted data on the ports given.
local pulsar = DissectorTable.get("tcp.port"):get_dissector(6650)
for port in string.gmatch((...) or "6651", "%d+") do DissectorTable.get("tls.port"):add(tonumber(port), pulsar) end
