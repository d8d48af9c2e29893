# SPDX-License-Identifier: Apache-2.0
# Checks of a load report (troupe_loadgen --report, load_report.h) that the example tests share:
# include() it from a check_*.cmake script. Each fails the test with FATAL_ERROR saying what is
# missing.

# Every pair of pairs.csv lost no event, saw no duplicate and has no problem.
# pairs.csv: pair,route,events,events_per_s,mb_per_s,p50_us,p99_us,p999_us,max_us,lost,dup,
# undelivered,unsure,problem
function(troupe_expect_clean_pairs report)
  file(STRINGS "${report}/pairs.csv" rows REGEX "^[0-9]+,")
  foreach(row IN LISTS rows)
    if(NOT row MATCHES
           "^[0-9]+,[0-9]+->[0-9]+,[0-9]+,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,0,0,[0-9]+,[0-9]+,$")
      message(FATAL_ERROR "pairs.csv: a pair lost events or has a problem: '${row}'")
    endif()
  endforeach()
endfunction()

# report.html holds each of the texts after `report`.
function(troupe_expect_html report)
  file(READ "${report}/report.html" html)
  foreach(text IN LISTS ARGN)
    string(FIND "${html}" "${text}" at)
    if(at LESS 0)
      message(FATAL_ERROR "report.html has no '${text}'")
    endif()
  endforeach()
endfunction()

# report.gp marks `rows` rows of chaos.csv, each four times: on the latency and the throughput
# plot, in the PNG and in the SVG.
function(troupe_expect_markers report rows what)
  file(STRINGS "${report}/report.gp" arrows REGEX "^set arrow from first [0-9.]+, graph 0")
  list(LENGTH arrows got)
  math(EXPR want "${rows} * 4")
  if(NOT got EQUAL want)
    message(FATAL_ERROR "report.gp: want ${want} ${what} markers (${rows} rows), got ${got}")
  endif()
endfunction()
