package org.sqlvault;

import java.util.ArrayList;
import java.util.List;

import uniffi.sqlvault_ffi.SqlValue;

/**
 * Conversions for application SQL ({@link Vault#execute}, {@link Vault#query} and the same on
 * {@link Tx}): Java arguments to bound parameters, native rows to {@code Object[]} of
 * {@code Long}, {@code Double}, {@code String}, {@code byte[]} or {@code null}.
 */
final class Sql {
    private Sql() {}

    /**
     * Integer, Long, Short and Byte bind as integers, Boolean as 0/1, Float and Double as
     * reals, String as text, byte[] as a blob, null as NULL; anything else is refused.
     */
    static List<SqlValue> params(Object... args) {
        List<SqlValue> out = new ArrayList<>(args == null ? 1 : args.length);
        if (args == null) {
            // execute(sql, (Object[]) null): no parameters.
            return out;
        }
        for (int i = 0; i < args.length; i++) {
            Object a = args[i];
            if (a == null) {
                out.add(SqlValue.Null.INSTANCE);
            } else if (a instanceof Long || a instanceof Integer || a instanceof Short || a instanceof Byte) {
                out.add(new SqlValue.Integer(((Number) a).longValue()));
            } else if (a instanceof Boolean) {
                out.add(new SqlValue.Integer((Boolean) a ? 1 : 0));
            } else if (a instanceof Double || a instanceof Float) {
                out.add(new SqlValue.Real(((Number) a).doubleValue()));
            } else if (a instanceof String) {
                out.add(new SqlValue.Text((String) a));
            } else if (a instanceof byte[]) {
                out.add(new SqlValue.Blob((byte[]) a));
            } else {
                throw new IllegalArgumentException("SQL parameter " + (i + 1)
                        + ": expected Long, Integer, Short, Byte, Boolean, Double, Float, String, byte[] or null, got "
                        + a.getClass().getName());
            }
        }
        return out;
    }

    static List<Object[]> rows(List<List<SqlValue>> rows) {
        List<Object[]> out = new ArrayList<>(rows.size());
        for (List<SqlValue> row : rows) {
            Object[] r = new Object[row.size()];
            for (int i = 0; i < r.length; i++) {
                r[i] = value(row.get(i));
            }
            out.add(r);
        }
        return out;
    }

    private static Object value(SqlValue v) {
        if (v instanceof SqlValue.Integer) {
            return ((SqlValue.Integer) v).getV();
        } else if (v instanceof SqlValue.Real) {
            return ((SqlValue.Real) v).getV();
        } else if (v instanceof SqlValue.Text) {
            return ((SqlValue.Text) v).getV();
        } else if (v instanceof SqlValue.Blob) {
            return ((SqlValue.Blob) v).getV();
        }
        return null;
    }
}
